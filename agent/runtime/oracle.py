"""The tool oracle of a replay (issue #31): which recorded call answers a call the replay makes.

A call matches a recorded call of the same tool with the same canonical arguments, each
recorded call answering once, in recorded order. What happens then is agent.runtime.replaying's;
this module holds the recording and what is used of it, and writes nothing."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cases.selectors import ReplaySetup
from tasks.canonical import canonical_hash

# Tools whose only effect is on the replay's own workspace: a matched call's effect on the
# files is re-applied there (its result is the recorded one), so files checks see it.
WORKSPACE_TOOLS = frozenset({"write_file", "append_file", "delete_file"})
# Tools a divergent call may run live with `on_divergence: sandbox`: the replay's workspace,
# and run_command in its sandbox without network. Anything else (HTTP, MCP, custom tools,
# run_command asking for network) stops the replay.
SANDBOX_TOOLS = frozenset(
    {"read_file", "list_files", "search_text", "write_file", "append_file", "delete_file"}
) | {"run_command"}


@dataclass
class ToolOracle:
    setup: ReplaySetup
    used: set[int] = field(default_factory=set)
    # The recorded call that answers the call in hand (None: it matched none).
    current: dict[str, Any] | None = None

    @classmethod
    def of(cls, setup: ReplaySetup) -> ToolOracle:
        oracle = cls(setup=setup)
        for tool, args_hash in setup.made:
            oracle._take(tool, args_hash)
        return oracle

    def _take(self, tool: str, args_hash: str) -> dict[str, Any] | None:
        for i, recorded in enumerate(self.setup.calls):
            if i in self.used:
                continue
            if recorded["tool"] == tool and recorded["args_hash"] == args_hash:
                self.used.add(i)
                return recorded
        return None

    def claim(self, *, tool: str, args: dict[str, Any]) -> dict[str, Any] | None:
        """The recorded call answering this one (used up), or None."""
        self.current = self._take(tool, canonical_hash(args))
        return self.current

    def may_run_live(self, *, tool: str, args: dict[str, Any]) -> bool:
        """Whether a call the recording does not answer may run: only when asked for, only a
        workspace tool or run_command, never with network."""
        if self.setup.on_divergence != "sandbox" or tool not in SANDBOX_TOOLS:
            return False
        return not (tool == "run_command" and args.get("network"))
