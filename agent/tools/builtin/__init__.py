"""The built-in tools (DESIGN §6). Every path is confined to the task's workspace, or, for
`/shared/<path>` in a multi-agent group with a shared directory, to that directory
(multiagent/shared.py), whose writes are serialised per path.

The modules: `paths` (the argument models and `place`), `reading` (read_file, list_files,
search_text), `writing` (write_file, append_file, delete_file); importing the package
registers every built-in tool.
"""

from __future__ import annotations

from agent.tools.builtin import reading, writing  # noqa: F401

# isort: split
# run_command and http_request live in their own modules; importing them registers them.
from agent.tools import command, http  # noqa: F401
