"""The core's models, one module per family, each importing only the modules listed below it:

    rollups      the statistics' roll-up tables (hourly and daily counts, RolledHour)
    operations   the sweeper's last run (SweepRun), API tokens, the operators' audit log
    calls        the tool-call ledger (ToolCall) and what each attempt produced (ToolOutput)
    events       the task's immutable event log (TaskEvent)
    templates    saved task templates (TaskTemplate)
    task         the task row (Task) and its Priority

This package re-exports every model (Django finds them here) and the names callers import
from `tasks.models` (ToolCallStatus included); code inside the package imports the
module that holds a name."""

from __future__ import annotations

from tasks.models.calls import PREVIEW_BYTES, OutputKind, ToolCall, ToolOutput
from tasks.models.events import TaskEvent
from tasks.models.operations import SWEEPER_NAME, ApiToken, AuditEntry, SweepRun
from tasks.models.rollups import (
    RolledHour,
    TaskCounts,
    TaskDaily,
    TaskHourly,
    TaskWaitCounts,
    TaskWaitDaily,
    TaskWaitHourly,
    ToolCallCounts,
    ToolCallDaily,
    ToolCallDurationCounts,
    ToolCallDurationDaily,
    ToolCallDurationHourly,
    ToolCallHourly,
    ToolCallStepCounts,
    ToolCallStepDaily,
    ToolCallStepHourly,
)
from tasks.models.task import Priority, Task
from tasks.models.templates import TaskTemplate
from tasks.states import ToolCallStatus

__all__ = [
    "PREVIEW_BYTES",
    "SWEEPER_NAME",
    "ApiToken",
    "AuditEntry",
    "OutputKind",
    "Priority",
    "RolledHour",
    "SweepRun",
    "Task",
    "TaskCounts",
    "TaskDaily",
    "TaskEvent",
    "TaskHourly",
    "TaskTemplate",
    "TaskWaitCounts",
    "TaskWaitDaily",
    "TaskWaitHourly",
    "ToolCall",
    "ToolCallCounts",
    "ToolCallDaily",
    "ToolCallDurationCounts",
    "ToolCallDurationDaily",
    "ToolCallDurationHourly",
    "ToolCallHourly",
    "ToolCallStatus",
    "ToolCallStepCounts",
    "ToolCallStepDaily",
    "ToolCallStepHourly",
    "ToolOutput",
]
