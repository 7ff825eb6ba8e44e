"""The timeline's rows (one per kind of work, one per tool and graph node), the colours of
checkpoint levels and call outcomes, and the lengths hover text is cut to."""

from __future__ import annotations

from tasks.models import ToolCallStatus

ROW_STEPS = "steps"
ROW_MODEL = "model"
ROW_HUMAN = "waiting for review"
ROW_HELD = "held"
ROW_BACKOFF = "retry backoff"
ROW_RECOVERY = "recovery"
ROW_CHECKPOINTS = "checkpoints"


LEVEL_COLORS = {"task": "#7b3fbf", "step": "#2457c5", "tool": "#c77700"}
STATUS_COLORS = {
    ToolCallStatus.SUCCEEDED: "#1e7b34",
    ToolCallStatus.FAILED: "#b3261e",
    ToolCallStatus.TIMED_OUT: "#d9480f",
    ToolCallStatus.UNKNOWN_OUTCOME: "#862e9c",
    ToolCallStatus.RUNNING: "#2457c5",
}
SUPERSEDED_OPACITY = 0.3
# An arguments summary's length in the hover, an error's.
ARGUMENTS_CHARS = 200
ERROR_CHARS = 200


def tool_row(name: str) -> str:
    return f"tool · {name}"


def node_row(name: str) -> str:
    return f"node · {name}"
