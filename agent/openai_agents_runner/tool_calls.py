"""Tool calls (ToolInvocation, part of AgentsRun): an approved function tool call through the
ledger, its row running -> succeeded/failed in fenced writes, a finished call replayed (a call
of unknown outcome an operator marked done: with their result)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from agent.openai_agents_runner.replay import RunReplay
from agent.openai_agents_runner.values import jsonable, short_text
from agent.runtime.attempt import tool_attempt_record, tool_exception_class, tool_label_known
from agent.sdk_run.inline import inline
from agent.sdk_run.unknown import settled_output
from agent.tracing import tool_span
from tasks import beacon, services
from tasks.events import EventType
from tasks.models import ToolCall, ToolCallStatus


class ToolInvocation(RunReplay):
    """AgentsRun's tool calls: invoke, call_end."""

    async def invoke(self, context: Any, arguments: str, *, tool: str, original: Callable) -> Any:
        """A function tool call, approved: through the ledger. A call that already finished
        replays its output; one approved with edited arguments runs with them."""
        call_id = self.call_id(str(getattr(context, "tool_call_id", "") or tool))
        row = self.ledger.get(call_id)
        if row is None:  # approved without a row: cannot happen through the harness's gate
            raise RuntimeError(f"tool call {call_id} has no ledger row")
        if row.status == ToolCallStatus.SUCCEEDED:
            # Its own output, or what an operator marked it done with (a call of unknown
            # outcome): the tool does not run again.
            self.event(EventType.TOOL_REPLAYED, {"call_id": call_id, "tool": tool})
            output = settled_output(row, "output")
            return output if isinstance(output, str) else json.dumps(output, default=str)
        self.boundary_checks()
        inline(self.commit, starting=row)
        started = time.monotonic()
        recorded = self.replay_recorded.get(call_id)
        if recorded is not None and not self.replay_live(tool):
            # A replay's call the recording answers (replay), without running the tool.
            value, error = self.replay_answer(row, recorded)
            self.call_end(row, output=value, error=error, started=started)
            if error is not None:
                raise error
            return value
        self.tools_running += 1
        beacon.expect("tool", self.tool_s)
        with tool_span(
            tool=tool,
            call_id=call_id,
            attempt=row.attempts,
            arguments=row.arguments,
            parent=self.trace_parent,
        ) as traced:
            try:
                output = await original(context, json.dumps(row.arguments))
            except Exception as exc:
                self.call_end(row, error=exc, started=started)
                traced.finished(
                    status=row.status,
                    error_class=row.error_class,
                    error_message=row.error_message,
                    result=None,
                )
                if recorded is not None:  # a replay's live call: checked against the recording
                    self.replay_compare(row, recorded)
                raise
            finally:
                self.tools_running -= 1
                if not self.tools_running:
                    beacon.progress()
            self.call_end(row, output=output, started=started)
            traced.finished(status=row.status, error_class="", error_message="", result=output)
        if recorded is not None:
            self.replay_compare(row, recorded)
        return output

    def call_end(
        self, row: ToolCall, *, started: float, output: Any = None, error: Exception | None = None
    ) -> None:
        fields: dict[str, Any] = {"duration_ms": round((time.monotonic() - started) * 1000, 3)}
        if error is None:
            fields["result"] = {"output": jsonable(output)}
            to = ToolCallStatus.SUCCEEDED
        else:
            fields.update(error_class=type(error).__name__, error_message=str(error)[:2000])
            to = ToolCallStatus.FAILED
        services.toolcall_transition(call=row, to=to, fields=fields, write=False)
        tool_attempt_record(
            tool=tool_label_known(row.tool, self.tool_names),
            seconds=fields["duration_ms"] / 1000,
            error_class="" if error is None else tool_exception_class(error),
        )
        self.event(
            EventType.TOOL_FINISHED,
            {
                "call_id": row.call_id,
                "tool": row.tool,
                "status": to,
                "duration_ms": fields["duration_ms"],
                **({"observation": short_text(output)} if error is None else {}),
                **({"error_class": fields["error_class"]} if error is not None else {}),
            },
        )
        # The outcome is sent behind, collected before the next write (the next call's
        # intent, a pause, the end): agent.sdk_run.write_behind.
        inline(self.commit, rows=[row], behind=True)
