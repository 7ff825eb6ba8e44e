"""A tool call's outcome (ToolCallResults, part of PydanticAIRun; called from HarnessTools in
the job's thread): its ledger row settled succeeded or failed, with the attempt's metric
and event (`tool_end`; written with the step's next write, `outcome_written`), left awaiting
review when the tool asked for approval itself (`tool_deferred`); a row written in one fenced
commit (`write_row`)."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from pydantic_ai.exceptions import ModelRetry

from agent.pydantic_ai_runner.constants import RESULT_MAX_CHARS
from agent.pydantic_ai_runner.core import RunCore
from agent.pydantic_ai_runner.messages import jsonable
from agent.runtime.attempt import tool_attempt_record, tool_exception_class, tool_label_known
from agent.runtime.run_writes import LEDGER_FIELDS
from tasks import services
from tasks.events import EventType
from tasks.models import ToolCall, ToolCallStatus


class ToolCallResults(RunCore):
    """A tool call's ledger row written and settled."""

    def write_row(self, row: ToolCall) -> None:
        if row.pk is None:
            self.commit(inserts=[row])
        else:
            self.commit(updates=[(row, LEDGER_FIELDS)])
        self.ledger[row.call_id] = row

    def outcome_written(self, row: ToolCall) -> None:
        """A settled call's row: written now while another call of the node still runs (a
        crash then would not lose this outcome), else with the next write — the step's
        `after_step`, the next call's intent, a pause or the end — which comes before anything
        else runs, so a crash in between leaves the call running, of unknown outcome, as a
        crash during the tool would."""
        self.calls_running -= 1
        if self.calls_running > 0:
            self.write_row(row)
            return
        self.deferred_rows.append(row)
        self.ledger[row.call_id] = row

    def tool_end(self, *, row: ToolCall, result: Any = None, error: BaseException | None = None):
        finished = timezone.now()
        started = row.started_at
        assert started is not None  # set when tool_begin moved the call to running
        duration_ms = (finished - started).total_seconds() * 1000
        if error is None:
            value = jsonable(result)
            services.toolcall_transition(
                call=row,
                to=ToolCallStatus.SUCCEEDED,
                now=finished,
                fields={"result": {"value": value}, "duration_ms": duration_ms},
                write=False,
            )
        else:
            message = str(error) or type(error).__name__
            services.toolcall_transition(
                call=row,
                to=ToolCallStatus.FAILED,
                now=finished,
                fields={
                    "error_class": type(error).__name__[:50],
                    "error_message": message[:2000],
                    "result": {"observation": message[:RESULT_MAX_CHARS]},
                    "duration_ms": duration_ms,
                },
                write=False,
            )
        tool_attempt_record(
            tool=tool_label_known(row.tool, self.tool_names),
            seconds=duration_ms / 1000,
            error_class="" if error is None else _tool_error_class(error),
        )
        self.event(
            EventType.TOOL_FINISHED,
            {
                "call_id": row.call_id,
                "tool": row.tool,
                "status": row.status,
                "attempt": row.attempts,
                "duration_ms": round(duration_ms, 3),
                "error_class": row.error_class,
            },
        )
        self.outcome_written(row)

    def tool_deferred(self, *, row: ToolCall) -> None:
        """The tool raised ApprovalRequired itself when it started: its row waits for review
        (written with the pause)."""
        self.calls_running -= 1
        services.toolcall_transition(call=row, to=ToolCallStatus.AWAITING_REVIEW, write=False)


def _tool_error_class(error: BaseException) -> str:
    """A tool's exception as an error class of the metrics: ModelRetry is the tool refusing
    its arguments (`permanent`)."""
    return "permanent" if isinstance(error, ModelRetry) else tool_exception_class(error)
