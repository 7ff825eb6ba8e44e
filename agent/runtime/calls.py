"""One tool call: its ledger row (call_id = idempotency key), a replay of a settled call
(call_again), the checks and the policy gate (call_gate), then the attempt (call_execute:
bounded by its timeout), its outcome written, and a retry scheduled or the failure handed
back to the model."""

from __future__ import annotations

import dataclasses

from pydantic import ValidationError

from agent.runtime.attempt import ToolOutcome
from agent.runtime.call_again import replay_outcome
from agent.runtime.call_execute import execute
from agent.runtime.call_gate import gate_and_execute, recheck_approval, refuse
from agent.runtime.delegation import await_delegations
from agent.runtime.drift_check import drift_before_call
from agent.runtime.ledger import ledger_row
from agent.runtime.plan import plan_gate, plan_record
from agent.runtime.replaying import replay_claim
from agent.runtime.run import Run, StopRun
from agent.validation import CHECK_ERROR_CLASSES, check_call
from harness_base import telemetry
from review.policy import PolicyDecision
from review.selectors.facts import call_edit
from tasks.agent_state import Message, ProposedCall
from tasks.canonical import canonical_hash
from tasks.feedback import edited_call_note
from tasks.models import ToolCall, ToolCallStatus
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


def call_run(
    run: Run,
    call: ProposedCall,
    *,
    compensation: bool = False,
    review_floor: PolicyDecision | None = None,
) -> ToolOutcome:
    """`compensation`: a rollback's compensating call (agent.runtime.compensate), whose tool
    the original's declaration (or harness.yaml) names, not the task's tool list;
    `review_floor`: the review it meets where the policy would allow it."""
    try:
        available = compensation or call.tool in run.tool_names()
        tool = run.tool(call.tool) if available else None
    except UnknownTool:
        tool = None
    row, is_new = ledger_row(run, call, tool)
    if not is_new:
        replay = replay_outcome(run, row)
        if replay is not None:
            return replay
    # Pending since before the code changed under it: it may not run as it is.
    drift_before_call(run, row, tool)
    if run.oracle is not None:
        # A replay of a case: the recorded call answering this one, or the divergence.
        replay_claim(run, call)
    if tool is None:
        return refuse(
            run,
            row,
            call,
            error_class="invalid_call",
            what=(f"tool {call.tool!r} is not available to this task"),
            expected=f"one of: {', '.join(run.tool_names()) or '(no tools)'}",
            check="call an available tool or give a final answer",
        )
    if call.raw_error:
        return refuse(
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
        return refuse(
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
            refused = recheck_approval(run, row, tool, args)
            if refused is not None:
                return refused
        return _told_of_edit(call, row, execute(run, row, tool, args))
    # Stricter checks before the policy gate: no human reviews a call that breaks them.
    failure = check_call(tool=tool, args=row.arguments, limits=run.limits)
    if failure is not None:
        return refuse(
            run,
            row,
            call,
            error_class="check_failed",
            what=failure.what,
            expected=failure.expected,
            check=failure.check,
        )
    if tool.side_effect and not compensation and run.planning:
        return plan_record(run, row, tool, args)
    if tool.side_effect and not compensation and run.plan is not None:
        return plan_gate(run, row, tool, args)
    return gate_and_execute(run, row, tool, args, review_floor=review_floor)


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
