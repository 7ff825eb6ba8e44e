"""One tool call: its ledger row (call_id = idempotency key), a replay of a settled call,
the checks and the policy gate, then the attempt (bounded by its timeout), its outcome
written, and a retry scheduled or the failure handed back to the model."""

from __future__ import annotations

import dataclasses
from typing import Any

from django.utils import timezone
from pydantic import ValidationError

from agent.retry import TIMEOUT, UNKNOWN_OUTCOME, is_retryable, retry_policy
from agent.runtime.attempt import ToolOutcome, invoke, observation
from agent.runtime.delegation import await_delegations
from agent.runtime.group import checkpoint_group_before
from agent.runtime.ledger import ledger_row
from agent.runtime.replaying import replay_answer, replay_claim, replay_refused, replay_review
from agent.runtime.review_gate import (
    distrust_standing_rules,
    escalate_unknown_outcome,
    pause_for_review,
)
from agent.runtime.run import Run, StopRun
from agent.tracing import tool_span
from agent.validation import CHECK_ERROR_CLASSES, check_call, check_result
from harness_base import telemetry
from review import policy
from review.recheck import approval_recheck, review_requirements
from review.selectors.facts import call_edit
from tasks import services
from tasks.agent_state import ErrorInfo, Message, ProposedCall
from tasks.canonical import canonical_hash
from tasks.events import EventType
from tasks.feedback import compact_feedback, edited_call_note
from tasks.fingerprint import call_targets
from tasks.models import ToolCall, ToolCallStatus
from tasks.outputs import live_output_get, output_rows, output_rows_last_seen, output_summary
from tasks.spec import DELEGATE_TOOL
from tasks.tools.registry import ToolSpec, UnknownTool


def call_next(run: Run) -> None:
    """The step's next pending call: run (or replayed), its observation the next message."""
    state = run.state
    call = state.pending[state.next_call]
    if call.tool == DELEGATE_TOOL and call.tool in run.spec.tools:
        await_delegations(run)
    with telemetry.log_context(call_id=call.call_id):
        outcome = call_run(run, call)
    state.messages.append(
        Message(
            role="tool",
            content=outcome.observation,
            call_id=call.call_id,
            name=call.tool,
            media=outcome.media or None,
        )
    )
    if outcome.error_class in CHECK_ERROR_CLASSES:
        run.note_check_failure(outcome.error_message)
    state.next_call += 1


def call_run(run: Run, call: ProposedCall) -> ToolOutcome:
    try:
        tool = run.tool(call.tool) if call.tool in run.tool_names() else None
    except UnknownTool:
        tool = None
    row, is_new = ledger_row(run, call, tool)
    if not is_new:
        replay = _replay_outcome(run, row)
        if replay is not None:
            return replay
    if run.oracle is not None:
        # A replay of a case: the recorded call answering this one, or the divergence.
        replay_claim(run, call)
    if tool is None:
        return _refuse(
            run,
            row,
            call,
            error_class="invalid_call",
            what=(f"tool {call.tool!r} is not available to this task"),
            expected=f"one of: {', '.join(run.tool_names()) or '(no tools)'}",
            check="call an available tool or give a final answer",
        )
    if call.raw_error:
        return _refuse(
            run,
            row,
            call,
            error_class="invalid_arguments",
            what=f"could not parse arguments for {tool.name}: {call.raw_error}",
            expected=_schema_hint(tool),
            check=f"send valid JSON arguments for {tool.name}",
        )
    # Approved by a human, or past the gate on an earlier attempt (a retry, or an idempotent
    # call interrupted by a crash): runs exactly as recorded.
    cleared = row.status in (
        ToolCallStatus.APPROVED,
        ToolCallStatus.RETRY_WAIT,
        ToolCallStatus.RUNNING,
    )
    args_source = row.arguments if cleared else call.args
    try:
        args = tool.args_model.model_validate(args_source)
    except ValidationError as exc:
        return _refuse(
            run,
            row,
            call,
            error_class="invalid_arguments",
            what=f"invalid arguments for {tool.name} ({_validation_summary(exc)})",
            expected=_schema_hint(tool),
            check=f"fix the arguments and call {tool.name} again",
        )
    if cleared:
        if row.arguments_hash and canonical_hash(row.arguments) != row.arguments_hash:
            raise StopRun(
                "internal_error",
                f"call {call.call_id}: approved arguments changed after approval",
            )
        if row.status == ToolCallStatus.APPROVED:
            refused = _recheck_approval(run, row, tool, args)
            if refused is not None:
                return refused
        return _told_of_edit(call, row, _execute(run, row, tool, args))
    # Stricter checks before the policy gate: no human reviews a call that breaks them.
    failure = check_call(tool=tool, args=row.arguments, limits=run.limits)
    if failure is not None:
        return _refuse(
            run,
            row,
            call,
            error_class="check_failed",
            what=failure.what,
            expected=failure.expected,
            check=failure.check,
        )
    return _gate_and_execute(run, row, tool, args)


def _told_of_edit(call: ProposedCall, row: ToolCall, outcome: ToolOutcome) -> ToolOutcome:
    """A call a reviewer edited ran with their arguments, not the model's: its result says so
    and which arguments changed, so the model's history matches what ran."""
    ran_hash = canonical_hash(row.arguments)
    if ran_hash == canonical_hash(call.args):
        return outcome
    edit = call_edit(tool_call_id=row.id, arguments_hash=ran_hash)
    if edit is None:
        return outcome
    note = edited_call_note(
        proposed=call.args, ran=row.arguments, by=edit["by"], comment=edit["comment"]
    )
    return dataclasses.replace(outcome, observation=f"{note}\n{outcome.observation}")


def _validation_summary(exc: ValidationError) -> str:
    parts = []
    for item in exc.errors()[:3]:
        loc = ".".join(str(p) for p in item["loc"]) or "arguments"
        parts.append(f"{loc}: {item['msg']}")
    more = len(exc.errors()) - 3
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def _schema_hint(tool: ToolSpec) -> str:
    schema = tool.json_schema()
    props = schema.get("properties", {})
    required = set(schema.get("required", []))
    fields = [
        f"{name}{'' if name in required else '?'}: {p.get('type', 'any')}"
        for name, p in props.items()
    ]
    return "{" + ", ".join(fields) + "}"


# -- a call met again: replay or interrupted ---------------------------------------------


def _replay_outcome(run: Run, row: ToolCall) -> ToolOutcome | None:
    """A call already settled in the ledger returns its stored outcome, never re-runs."""
    if row.status == ToolCallStatus.SUCCEEDED:
        run.event(EventType.TOOL_REPLAYED, {"call_id": row.call_id, "tool": row.tool})
        return ToolOutcome(
            status=row.status, observation=observation(row.result), result=row.result
        )
    if row.status in (
        ToolCallStatus.FAILED,
        ToolCallStatus.TIMED_OUT,
        ToolCallStatus.DENIED,
        ToolCallStatus.REJECTED,
    ):
        result = row.result if isinstance(row.result, dict) else {}
        message = result.get("observation")
        return ToolOutcome(
            status=row.status,
            observation=message or row.error_message,
            error_class=row.error_class,
            error_message=row.error_message,
        )
    if row.status in (ToolCallStatus.RUNNING, ToolCallStatus.UNKNOWN_OUTCOME):
        return _on_interrupted_call(run, row)
    return None


def _on_interrupted_call(run: Run, row: ToolCall) -> ToolOutcome | None:
    """The ledger says this call was running when its worker stopped. An idempotent tool
    runs again with the same call_id; a non-idempotent one is never blindly re-run: its
    outcome is unknown and a human decides (mark it done, re-run it, or fail the task)."""
    try:
        tool = run.tool(row.tool)
    except UnknownTool:
        tool = None
    if row.status == ToolCallStatus.RUNNING and tool is not None and tool.idempotent:
        run.event(EventType.TOOL_RERUN_IDEMPOTENT, {"call_id": row.call_id, "tool": row.tool})
        return None
    if row.status == ToolCallStatus.RUNNING:
        # What the page last showed of it, for the person who decides what happened.
        seen = live_output_get(task_id=run.task_id)
        if seen and seen.get("call_id") == row.call_id and seen.get("attempt") == row.attempts:
            run.pending_outputs += output_rows_last_seen(task_id=run.task_id, record=seen)
    escalate_unknown_outcome(run, row)


# -- before the attempt: refused, denied or gated --------------------------------------


def _refuse(
    run: Run,
    row: ToolCall,
    call: ProposedCall,
    *,
    error_class: str,
    what: str,
    expected: str,
    check: str,
    status: str = ToolCallStatus.FAILED,
) -> ToolOutcome:
    if run.oracle is not None:
        replay_refused(run, call, status=status, error_class=error_class, what=what)
    feedback = compact_feedback(what=what, expected=expected, check=check)
    run.state.budget.invalid_calls += error_class in ("invalid_arguments", "invalid_call")
    services.toolcall_transition(
        call=row,
        to=status,
        fields={
            "error_class": error_class,
            "error_message": what,
            "result": {"observation": feedback},
        },
        write=False,
    )
    run.event(
        EventType.TOOL_REFUSED,
        {
            "call_id": call.call_id,
            "tool": call.tool,
            "error_class": error_class,
            "feedback": feedback,
        },
    )
    # Nothing ran: written with the step's next write.
    run.deferred_rows.append(row)
    return ToolOutcome(
        status=status, observation=feedback, error_class=error_class, error_message=what
    )


def _gate_and_execute(run: Run, row: ToolCall, tool: ToolSpec, args: Any) -> ToolOutcome:
    decision = policy.evaluate(tool=tool, args=row.arguments, spec=run.task.spec)
    if decision.action == "deny":
        return _refuse(
            run,
            row,
            ProposedCall(call_id=row.call_id, tool=row.tool, args=row.arguments),
            error_class="denied",
            status=ToolCallStatus.DENIED,
            what=f"{tool.name} was denied by policy: {decision.reason}",
            expected="a call the policy allows",
            check="choose a safer action or explain in the final answer why it is needed",
        )
    if decision.action == "review" and run.oracle is not None:
        replay_review(
            run,
            ProposedCall(call_id=row.call_id, tool=row.tool, args=row.arguments),
            rules=[str(r.get("name", "")) for r in decision.rules],
        )
    elif decision.action == "review":
        pause_for_review(run, row, tool, args, decision)
    return _execute(run, row, tool, args)


def _recheck_approval(run: Run, row: ToolCall, tool: ToolSpec, args: Any) -> ToolOutcome | None:
    """An approved call, just before it runs: its approval must still hold
    (review.recheck.approval_recheck: deadline, arguments, approvers, policy, targets). If it
    does not, the call does not run: a policy that now refuses it refuses it; anything else
    reopens it as a new review that says what changed (the policy's requirements now, else
    the old review's), and the task waits for it. None: it still holds (or a standing rule
    approved the reopened call)."""
    ctx = run.tool_context(row)
    check = approval_recheck(
        tool_call=row,
        tool=tool,
        task=run.task,
        targets=lambda: call_targets(tool=tool, ctx=ctx, args=args, arguments=row.arguments),
        now=timezone.now(),
    )
    if check.holds:
        return None
    if check.denied:
        return _refuse(
            run,
            row,
            ProposedCall(call_id=row.call_id, tool=row.tool, args=row.arguments),
            error_class="denied",
            status=ToolCallStatus.DENIED,
            what=f"{tool.name} was approved, but the policy now denies it: {check.policy.reason}",
            expected="a call the policy allows",
            check="choose a safer action or explain in the final answer why it is needed",
        )
    decision = check.policy
    if decision.action != "review" and check.review is not None:
        decision = review_requirements(review=check.review)
    # Pauses, unless a standing rule approves the reopened call: then it runs (returns).
    pause_for_review(
        run, row, tool, args, decision, reopened_from=check.review, changes=check.changes
    )
    return None


# -- the attempt -----------------------------------------------------------------------


def _execute(run: Run, row: ToolCall, tool: ToolSpec, args: Any) -> ToolOutcome:
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
            "args": row.arguments,
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


def _record_outcome(run: Run, row: ToolCall, tool: ToolSpec, outcome: ToolOutcome) -> None:
    """The attempt's outcome on the row (unsaved) and its `tool_finished` event."""
    finished = timezone.now()
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
            "duration_ms": (finished - row.started_at).total_seconds() * 1000,
        },
        write=False,
    )
    row.attempt_log = [
        *row.attempt_log,
        {
            "n": row.attempts,
            "started_at": row.started_at.isoformat(),
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
            "duration_ms": round(row.duration_ms, 3),
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
