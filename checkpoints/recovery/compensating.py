"""A rollback's compensations into the state it forks (issue #44): the plan's compensating
calls (newest original first) become the loop's first work (agent.runtime.compensate), with a
`compensating` event written with the rollback, so the timeline shows it before it is
acknowledged. Shared by the rollback of one task and the group rollback."""

from __future__ import annotations

from typing import Any

from tasks import services
from tasks.agent_state import AgentState, Compensation, compensation_call_id
from tasks.events import EventType
from tasks.selectors import PlannedCompensation


def compensations_into(
    state: AgentState, planned: list[PlannedCompensation], *, resume: bool
) -> list[Compensation]:
    """Write the planned compensations into the restored state; one of the restored state
    still pending (a rollback to a checkpoint taken while an earlier rollback compensated)
    stays after them. The task then resumes, or is held once they have run. -> all of them."""
    new = [
        Compensation(
            call_id=compensation_call_id(item.call_id),
            original_call_id=item.call_id,
            original_tool=item.call.tool,
            tool=item.tool,
            args=item.arguments,
            review=item.review,
            outcome_unknown=item.outcome_unknown,
        )
        for item in planned
    ]
    ids = {c.call_id for c in new}
    state.compensations = new + [
        c for c in state.compensations if c.outcome == "pending" and c.call_id not in ids
    ]
    state.after_compensations = "resume" if resume else "hold"
    return state.compensations


def compensations_noted(compensations: list[Compensation]) -> list[str]:
    """The compensations as the agent's recovery note lists them."""
    return [
        f"{c.original_tool} {c.original_call_id} by {c.tool} {c.args}"[:300] for c in compensations
    ][:100]


def compensating_record(*, task_id: Any, actor: str, state: AgentState) -> None:
    """The `compensating` event, in the recovery's transaction."""
    services.event_record(
        task_id=task_id,
        type=EventType.COMPENSATING,
        actor=actor,
        step_index=state.step_index,
        payload={
            "compensations": [
                {
                    "call_id": c.call_id,
                    "original_call_id": c.original_call_id,
                    "original_tool": c.original_tool,
                    "tool": c.tool,
                    "arguments": c.args,
                    "review": c.review,
                    "outcome_unknown": c.outcome_unknown,
                }
                for c in state.compensations
            ][:100],
            "then": state.after_compensations,
        },
    )
