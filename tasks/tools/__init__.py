"""The tool vocabulary (specs, the registry, the `@tool` decorator, tool errors): what
`tasks.tools.registry` exports, importable as `tasks.tools` (explicit re-exports)."""

from tasks.tools.registry import Compensate as Compensate
from tasks.tools.registry import PermanentToolError as PermanentToolError
from tasks.tools.registry import ToolContext as ToolContext
from tasks.tools.registry import ToolError as ToolError
from tasks.tools.registry import ToolSpec as ToolSpec
from tasks.tools.registry import TransientToolError as TransientToolError
from tasks.tools.registry import UnknownTool as UnknownTool
from tasks.tools.registry import registry as registry
from tasks.tools.registry import tool as tool
