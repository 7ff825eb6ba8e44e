from tasks.tools.registry import (
    PermanentToolError,
    ToolContext,
    ToolError,
    ToolSpec,
    TransientToolError,
    UnknownTool,
    registry,
    tool,
)

__all__ = [
    "PermanentToolError",
    "ToolContext",
    "ToolError",
    "ToolSpec",
    "TransientToolError",
    "UnknownTool",
    "registry",
    "tool",
]
