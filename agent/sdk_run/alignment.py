"""Context alignment for SDK agents: after a rollback (or a retry, a forward), the agent is
told what happened in the words the native loop uses (checkpoints.alignment: the steps
completed, the files modified, what was undone, what not to repeat). The steps come from the
ledger (an SDK's history is its own); each runner puts the text into the history its SDK
resumes from (Pydantic AI: a user prompt in the last request; OpenAI Agents SDK: a user
message where the run resumed, agent.openai_agents_runner.harness_model)."""

from __future__ import annotations

from itertools import groupby
from typing import Any

from checkpoints.alignment import alignment_summary, alignment_text, brief
from checkpoints.services import LoadedCheckpoint
from tasks.agent_state import AgentState
from tasks.models import ToolCall


def ledger_steps(
    *, task_id: Any, loaded: LoadedCheckpoint, undone: list[str]
) -> list[dict[str, Any]]:
    """The steps done before the checkpoint, from the ledger: its calls made before it was
    taken, less those the recovery undid (named as checkpoints.recovery names them)."""
    rows = [
        row
        for row in ToolCall.objects.filter(
            task_id=task_id, created_at__lt=loaded.checkpoint.created_at
        ).order_by("step_index", "id")
        if f"{row.tool} {row.call_id} (step {row.step_index})" not in undone
    ]
    return [
        {
            "step": number,
            "calls": [
                {
                    "call_id": row.call_id,
                    "tool": row.tool,
                    "args": brief(row.arguments, 100),
                    "status": row.status,
                    "result": brief(row.result) if row.result is not None else None,
                }
                for row in calls
            ],
        }
        for number, (_, calls) in enumerate(groupby(rows, key=lambda row: row.step_index), 1)
    ]


def sdk_alignment(
    *, task_id: Any, state: AgentState, loaded: LoadedCheckpoint
) -> tuple[dict[str, Any], str] | None:
    """(the summary, its text for the model) when this pick-up follows a recovery, else
    None. The caller clears the recovery note."""
    note = state.recovery
    if note is None:
        return None
    summary = alignment_summary(
        task_id=task_id,
        state=state,
        kind=note.kind,
        checkpoint=loaded.checkpoint,
        snapshot=loaded.snapshot,
        steps=ledger_steps(task_id=task_id, loaded=loaded, undone=note.undone.get("calls", [])),
    )
    return summary, alignment_text(summary)
