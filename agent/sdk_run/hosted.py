"""Hosted tools of an SDK agent (OpenAI Agents SDK: WebSearchTool, FileSearchTool,
CodeInterpreterTool, ImageGenerationTool, …; Pydantic AI: its native tools WebSearchTool,
CodeExecutionTool, …): the model's provider runs them inside the model's turn, so the harness
sees a call only in the response, after it ran. Both SDK runners share what they do with them:

- every call the response holds is a ledger row (`hosted_call_record`: tool name, its inputs as
  arguments, its result, `succeeded` or `failed`; risk `hosted`), on the timeline as
  `tool_started` / `tool_finished` with `hosted: true`, counted in the statistics as any call;
- before a model turn whose request offers hosted tools, the rules decide each one by name
  (review.hosted.hosted_tool_policy): allow -> offered; deny -> the turn goes without it;
  review -> the turn is not asked until a person decides (`hosted_turn`): one ledger row per
  tool and turn, call id `…hosted<step>:<tool>` (its arguments: the agent and the tool's
  configuration), reviewed like any call; approve -> that turn is offered the tool, reject ->
  that turn goes without it. The row stays `approved` (it is a permission, not a call: the
  calls the turn made are their own rows), so it is in no statistic of outcomes; its approval
  is checked again each time a turn is to use it, and one that no longer holds is asked
  again (a reopened review saying what changed)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from agent.sdk_run.rechecks import Drifted, approvals_drifted, approvals_reasked, reviews_reopen
from review.hosted import HOSTED_RISK, hosted_tool_policy
from review.models import ReviewRequest
from review.policy import PolicyDecision
from tasks import services
from tasks.canonical import canonical_hash
from tasks.events import EventType
from tasks.models import ToolCall, ToolCallStatus

# A hosted call's inputs and result as stored (an image's base64, a page of search results):
# past this, the JSON text is kept clipped.
HOSTED_JSON_MAX_CHARS = 20_000
# The turn's permission row's status that offers the tool / withholds it.
_REFUSED = (ToolCallStatus.REJECTED, ToolCallStatus.DENIED)
_SETTLED = (ToolCallStatus.SUCCEEDED, ToolCallStatus.FAILED)


def hosted_json(value: Any, limit: int = HOSTED_JSON_MAX_CHARS) -> Any:
    """`value` as JSON; too long: its text clipped, with its length."""
    text = json.dumps(value, default=str, ensure_ascii=False)
    if len(text) <= limit:
        return json.loads(text)
    return {"clipped": text[:limit], "chars": len(text)}


def _row(run: Any, *, call_id: str, tool: str, arguments: dict[str, Any]) -> ToolCall:
    """A new ledger row of a hosted tool (unsaved), in the run's ledger."""
    arguments = hosted_json(arguments)
    row = ToolCall(
        task_id=run.task_id,
        call_id=call_id,
        tool=tool[:100],
        arguments=arguments,
        arguments_hash=canonical_hash(arguments),
        risk=HOSTED_RISK,
        step_index=run.state.step_index,
    )
    run.ledger[call_id] = row
    return row


def hosted_call_record(
    run: Any,
    *,
    call_id: str,
    tool: str,
    arguments: dict[str, Any],
    result: Any,
    error: str = "",
) -> ToolCall | None:
    """The ledger row of a hosted call the model's response holds (unsaved: the runner's next
    fenced write inserts it), settled as the provider reported it. None: recorded already (a
    turn read again after a pause)."""
    if call_id in run.ledger:
        return None
    row = _row(run, call_id=call_id, tool=tool, arguments=arguments)
    run.call_started(row)
    fields: dict[str, Any] = {"result": {"output": hosted_json(result), "hosted": True}}
    if error:
        fields.update(error_class="hosted_call_failed", error_message=error[:2000])
    to = ToolCallStatus.FAILED if error else ToolCallStatus.SUCCEEDED
    services.toolcall_transition(call=row, to=to, fields=fields, write=False)
    run.event(
        EventType.TOOL_FINISHED,
        {
            "call_id": call_id,
            "tool": row.tool,
            "status": to,
            "hosted": True,
            **({"error_class": "hosted_call_failed"} if error else {}),
        },
    )
    return row


@dataclasses.dataclass
class HostedTurn:
    """What the rules and the people's decisions allow the next model turn."""

    offered: set[str] = dataclasses.field(default_factory=set)
    withheld: set[str] = dataclasses.field(default_factory=set)
    # (row, the policy's decision, why) of each tool a person has to allow first.
    waiting: list[tuple[ToolCall, PolicyDecision, str]] = dataclasses.field(default_factory=list)
    # The permission rows made now (unsaved).
    new: list[ToolCall] = dataclasses.field(default_factory=list)
    # Approvals that no longer hold (agent.sdk_run.rechecks): their rows are back to awaiting
    # review (to update), each review to reopen in the pause (reviews_reopen).
    drifted: Drifted = dataclasses.field(default_factory=list)
    reasked: list[ToolCall] = dataclasses.field(default_factory=list)

    def reopen(self, run: Any, *, kind: str, checkpoint_id: Any) -> None:
        """The drifted approvals' reviews reopened (inside the runner's pause)."""
        rows = {row.pk: row for row in self.reasked}
        reviews_reopen(
            run,
            self.drifted,
            kind=kind,
            checkpoint_of=lambda _review: checkpoint_id,
            row_of=lambda review: rows[review.tool_call_id],
        )


def hosted_turn(
    run: Any, *, tools: dict[str, Any], agent: str, call_id: Any, spec: dict[str, Any]
) -> HostedTurn:
    """The hosted tools (name -> configuration) a model turn of `agent` would be offered,
    decided by the rules and by the people's decisions on this turn's permission rows
    (`call_id(local id)`: the runner's ledger id for this turn)."""
    turn = HostedTurn()
    for name, config in sorted(tools.items()):
        decision = hosted_tool_policy(tool_name=name, spec=spec)
        if decision.action == "allow":
            turn.offered.add(name)
            continue
        if decision.action == "deny":
            turn.withheld.add(name)
            continue
        row_id = call_id(f"hosted{run.state.step_index}:{name}")
        row = run.ledger.get(row_id)
        why = f"the next model turn of {agent} may use the hosted tool {name}"
        if row is None:
            arguments = {"agent": agent, "hosted_tool": config}
            row = _row(run, call_id=row_id, tool=name, arguments=arguments)
            services.toolcall_transition(call=row, to=ToolCallStatus.AWAITING_REVIEW, write=False)
            turn.new.append(row)
            turn.waiting.append((row, decision, why))
        elif row.status == ToolCallStatus.APPROVED:
            drifted = approvals_drifted(
                run, ReviewRequest.objects.filter(tool_call=row, reopened_as__isnull=True)
            )
            if not drifted:
                turn.offered.add(name)
                continue
            # The approval is checked again when it takes effect (deadline, approvers, rules).
            approvals_reasked(run, drifted, move=_back_to_review, row_of=_constant(row))
            turn.drifted.extend(drifted)
            turn.reasked.append(row)
            turn.waiting.append((row, decision, why))
        elif row.status in _REFUSED:
            turn.withheld.add(name)
        else:
            turn.waiting.append((row, decision, why))
    return turn


def _constant(row: ToolCall) -> Callable[[ReviewRequest], ToolCall]:
    def row_of(_review: ReviewRequest) -> ToolCall:
        return row

    return row_of


def _back_to_review(row: ToolCall) -> None:
    services.toolcall_transition(call=row, to=ToolCallStatus.AWAITING_REVIEW, write=False)


def hosted_permission(row: ToolCall) -> bool:
    """Whether a ledger row is a turn's permission to use a hosted tool (a hosted call's row
    is settled from the start: succeeded or failed)."""
    return row.risk == HOSTED_RISK and row.status not in _SETTLED
