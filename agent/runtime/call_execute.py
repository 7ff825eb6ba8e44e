"""A tool call's attempt (`execute`): its intent written before a side effect, the tool run
(bounded by its timeout) or answered from a recording, its outcome recorded on the ledger row
and written with the next write, then a retry scheduled or the failure left to the model."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from agent.retry import TIMEOUT, UNKNOWN_OUTCOME, is_retryable, retry_policy
from agent.runtime.attempt import ToolOutcome, invoke
from agent.runtime.group import checkpoint_group_before
from agent.runtime.replaying import replay_answer
from agent.runtime.review_gate import distrust_standing_rules, escalate_unknown_outcome
from agent.runtime.run import Run, StopRun
from agent.tracing import tool_span
from agent.validation import check_result
from tasks import services
from tasks.agent_state import ErrorInfo
from tasks.events import EventType
from tasks.feedback import compact_feedback
from tasks.models import ToolCall, ToolCallStatus
from tasks.outputs import output_rows, output_summary
from tasks.tools.registry import ToolSpec


def execute(run: Run, row: ToolCall, tool: ToolSpec, args: Any) -> ToolOutcome:
    checkpoint_group_before(run, row, tool)
    # A replay's call the recording answers (agent.runtime.replaying) does not run: no live
    # side effect whose intent must be durable first, so it is written as a read-only call.
    answered = run.oracle is not None and run.oracle.current is not None
    side_effect = tool.side_effect and not answered
    if not side_effect and (run.turn_unwritten or run.effect_unwritten):
        # The model's decision and the outcomes of side effects are durable before any tool
        # runs: a crash during the call resumes from them, without asking the model again or
        # leaving a finished side effect's outcome unknown. A read-only step writes only this;
        # its calls' outcomes and its end ride with the next write.
        run.commit(trigger=None)
    timeout_s = min(tool.timeout_s, run.tool_s)
    ctx = run.tool_context(row)
    ctx.timeout_s = timeout_s
    services.toolcall_transition(
        call=row,
        to=ToolCallStatus.RUNNING,
        fields={"attempts": row.attempts + 1},
        write=False,
    )
    run.event(
        EventType.TOOL_STARTED,
        {
            "call_id": row.call_id,
            "tool": tool.name,
            "attempt": row.attempts,
            **_args_if_changed(run, row),
        },
    )
    if side_effect:
        # The intent is durable (with a checkpoint) before the side effect starts.
        trigger = "before_external_call" if tool.risk == "external" else "before_write_operation"
        run.commit(trigger=trigger, extra=[row])
    elif tool.server:
        # An MCP call may run long (its progress shows live): its row and `tool_started`
        # are on the task page and in the event log while it runs, as a side effect's are.
        run.commit(trigger=None, extra=[row])
    run.live.begin(call_id=row.call_id, tool=tool.name, attempt=row.attempts, output=ctx.output)
    try:
        with tool_span(
            tool=tool.name, call_id=row.call_id, attempt=row.attempts, arguments=row.arguments
        ) as traced:
            if answered:
                outcome = replay_answer(run, tool, ctx, args)
            else:
                outcome = invoke(run, tool, ctx, args)
            traced.finished(
                status=outcome.status,
                error_class=outcome.error_class,
                error_message=outcome.error_message,
                result=outcome.result,
            )
    finally:
        run.live.end()
    run.pending_outputs += output_rows(
        task_id=run.task_id, call_id=row.call_id, attempt=row.attempts, output=ctx.output
    )
    if tool.server:
        run.note_mcp_errors()
    # A replayed call's outcome is the recording's, settled as it was: nothing to escalate or
    # retry (the recording holds the last attempt's outcome).
    escalable = side_effect and not tool.idempotent
    if outcome.error_class == UNKNOWN_OUTCOME and escalable:
        # The tool itself cannot tell whether it took effect (an MCP server that died or
        # timed out mid-call).
        escalate_unknown_outcome(run, row, message=outcome.error_message)
    if outcome.abandoned and escalable:
        # Timed out, ignored its stop, and may still act: neither "failed" (the model would
        # try again, a duplicate) nor "succeeded" is known. A human decides.
        escalate_unknown_outcome(
            run,
            row,
            message=(
                f"{tool.name} (call {row.call_id}) timed out after {timeout_s:g}s and did not "
                "stop; it is not idempotent, so whether it took effect is unknown"
            ),
        )
    if outcome.status == ToolCallStatus.SUCCEEDED:
        failure = check_result(tool=tool, result=outcome.result)
        if failure is not None:
            outcome = ToolOutcome(
                status=ToolCallStatus.FAILED,
                result=outcome.result,
                observation=failure.feedback,
                error_class="check_failed",
                error_message=failure.what,
            )
    _record_outcome(run, row, tool, outcome)
    if outcome.error_class == TIMEOUT:
        run.timeout_event(layer="tool", limit_s=timeout_s, call_id=row.call_id, tool=tool.name)
    # The outcome is written with the next write: a side effect's before the next tool runs
    # or with `after_step`, a read-only call's with the next step's write (a retry's pause or
    # the run's last write, after a cancel, carry it too). A crash before then re-runs a
    # read-only or idempotent call; a side effect's intent is durable, so a crash leaves a
    # non-idempotent call's outcome unknown, for a human to decide.
    run.deferred_rows.append(row)
    run.effect_unwritten |= side_effect
    if outcome.error_class == "canceled":
        raise StopRun("canceled", "canceled by operator")
    if outcome.status != ToolCallStatus.SUCCEEDED and not answered:
        _retry_or_settle(run, row, tool, outcome)
        if not is_retryable(outcome.error_class, idempotent=tool.idempotent):
            distrust_standing_rules(row, error=f"{outcome.error_class}: {outcome.error_message}")
    return outcome


def _args_if_changed(run: Run, row: ToolCall) -> dict[str, Any]:
    """The arguments a call runs with, for its `tool_started` event, when they are not the ones
    the model proposed (in the step's `model_decision` event): edited by a reviewer, or a
    call no model proposed (a compensation). Otherwise the event leaves them out: the
    ledger row and the decision already hold them, and a write's content is not stored a
    third time."""
    proposed = next((c for c in run.state.pending if c.call_id == row.call_id), None)
    if proposed is not None and proposed.args == row.arguments:
        return {}
    return {"args": row.arguments}


def _record_outcome(run: Run, row: ToolCall, tool: ToolSpec, outcome: ToolOutcome) -> None:
    """The attempt's outcome on the row (unsaved) and its `tool_finished` event."""
    finished = timezone.now()
    started = row.started_at
    assert started is not None  # set when `execute` moved the attempt to running
    duration_ms = (finished - started).total_seconds() * 1000
    services.toolcall_transition(
        call=row,
        to=outcome.status,
        now=finished,
        fields={
            "result": (
                outcome.result
                if outcome.status == ToolCallStatus.SUCCEEDED
                else {
                    "observation": outcome.observation,
                    **({"result": outcome.result} if outcome.result is not None else {}),
                }
            ),
            "error_class": outcome.error_class,
            "error_message": outcome.error_message,
            "duration_ms": duration_ms,
        },
        write=False,
    )
    row.attempt_log = [
        *row.attempt_log,
        {
            "n": row.attempts,
            "started_at": started.isoformat(),
            "finished_at": finished.isoformat(),
            "status": outcome.status,
            "error_class": outcome.error_class,
            "error_message": outcome.error_message[:500],
            **output_summary(outcome.result),
        },
    ]
    run.event(
        EventType.TOOL_FINISHED,
        {
            "call_id": row.call_id,
            "tool": tool.name,
            "status": outcome.status,
            "attempt": row.attempts,
            "duration_ms": round(duration_ms, 3),
            "error_class": outcome.error_class,
            # An MCP answer's non-text content: what it is and its URI (never its data).
            **(
                {"content": outcome.result["content"]}
                if tool.server
                and isinstance(outcome.result, dict)
                and isinstance(outcome.result.get("content"), list)
                else {}
            ),
        },
    )


def _retry_or_settle(run: Run, row: ToolCall, tool: ToolSpec, outcome: ToolOutcome) -> None:
    """A failed attempt: schedule the next one (same call_id) when the error is retryable
    and attempts remain; otherwise the failure stands and goes back to the model."""
    if not is_retryable(outcome.error_class, idempotent=tool.idempotent):
        return
    retries = retry_policy(
        config=run.config, tool_override=tool.retry, task_override=run.spec.retry
    )
    if row.attempts >= retries.max_attempts:
        if row.attempts == 1:
            return
        outcome.observation = compact_feedback(
            what=f"{tool.name} failed {row.attempts} times; last error: {outcome.error_message}",
            expected=f"{tool.name} to succeed",
            check="try later or take another approach",
        )
        row.result = {"observation": outcome.observation}
        return
    services.toolcall_transition(call=row, to=ToolCallStatus.RETRY_WAIT, write=False)
    run.schedule_retry(
        attempt=row.attempts,
        delay_s=retries.delay_s(row.attempts, retry_after_s=outcome.retry_after_s),
        error=ErrorInfo(
            error_class=outcome.error_class,
            message=outcome.error_message[:2000],
            step_index=run.state.step_index,
            call_id=row.call_id,
        ),
        extra=[row],
    )
