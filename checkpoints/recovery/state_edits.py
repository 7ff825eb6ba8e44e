"""The edits a recovery makes to the agent state it forks: a new branch, fresh call_ids for
the calls that run again, and the failure its recovery note records."""

from __future__ import annotations

from tasks.agent_state import AgentState, ErrorInfo
from tasks.models import Task, ToolCall


def new_branch(task: Task, state: AgentState) -> int:
    """A branch number no call_id of this task has used, so calls on the new branch never
    collide with the ledger rows of superseded ones."""
    used = [state.branch]
    for call_id in ToolCall.objects.filter(task=task).values_list("call_id", flat=True):
        head = call_id.split(".", 1)[0]
        if head.isdigit():
            used.append(int(head))
    return max(used) + 1


def calls_rekey(state: AgentState, call_ids: set[str] | None) -> dict[str, str]:
    """Give fresh call_ids on the state's branch to the pending calls not yet finished (all of
    them, or those in `call_ids`), in `pending` and in the assistant message that proposed
    them, so they run again instead of replaying the ledger."""
    mapping: dict[str, str] = {}
    turn = max(state.turn_index - 1, 0)
    for index, call in enumerate(state.pending):
        if index >= state.next_call and (call_ids is None or call.call_id in call_ids):
            mapping[call.call_id] = f"{state.branch}.{turn}.{index}"
            call.call_id = mapping[call.call_id]
    for message in reversed(state.messages):
        if message.role == "assistant" and message.calls:
            for call in message.calls:
                call.call_id = mapping.get(call.call_id, call.call_id)
            break
    return mapping


def live_call_ids(state: AgentState) -> set[str]:
    """The call_ids on the branch of a state about to be forked (after calls_rekey): those it
    settled (their tool messages) and those it still has pending (fresh ones, and any kept)."""
    return {m.call_id for m in state.messages if m.role == "tool" and m.call_id} | {
        c.call_id for c in state.pending
    }


def last_failure(task: Task, state: AgentState) -> ErrorInfo | None:
    if task.error_class:
        return ErrorInfo(
            error_class=task.error_class,
            message=task.error_message[:2000],
            step_index=task.current_step,
        )
    return state.last_error
