"""Context alignment: what the agent is told when it resumes after a redispatch."""

from __future__ import annotations

import pytest

from checkpoints.alignment import context_align
from checkpoints.models import Checkpoint
from tasks.agent_state import AgentState, Message, ProposedCall
from tasks.models import ToolCall
from tasks.services import event_record

pytestmark = pytest.mark.django_db


def test_a_redispatched_task_is_told_what_was_done_and_where_to_continue(make_task):
    task = make_task(
        {"title": "t", "goal": "g", "model": {"kind": "scripted", "script": [{"final": "x"}]}}
    )
    done = ProposedCall(call_id="0.0.0", tool="write_file", args={"path": "a.txt"})
    pending = ProposedCall(call_id="0.1.0", tool="ledger_append", args={"key": "k"})
    state = AgentState(
        phase="tools",
        step_index=1,
        turn_index=2,
        pending=[pending],
        messages=[
            Message(role="system", content="s"),
            Message(role="user", content="goal"),
            Message(role="assistant", calls=[done]),
            Message(role="tool", call_id="0.0.0", name="write_file", content='{"bytes": 3}'),
            Message(role="assistant", calls=[pending]),
        ],
    )
    ToolCall.objects.create(
        task=task, call_id="0.0.0", tool="write_file", arguments=done.args, status="succeeded"
    )
    event_record(task_id=task.id, type="status", payload={"from": "stalled", "to": "queued"})
    checkpoint = Checkpoint(task=task, seq=1, level="step", trigger="after_model")

    summary = context_align(task_id=task.id, state=state, checkpoint=checkpoint, snapshot=None)

    assert summary["kind"] == "redispatch"
    assert summary["steps_completed"][0]["calls"][0]["status"] == "succeeded"
    assert "ledger_append (0.1.0)" in summary["continue_at"]
    assert summary["last_failure"]["error_class"] == "worker_lost"
    note = state.messages[4]
    assert note.role == "user" and note.content.startswith("[harness] This task was moved")
    # Tool results still directly follow the assistant message that asked for them.
    assert state.messages[5].calls == [pending]
    assert "Do not repeat: write_file" in note.content


def test_an_ordinary_resume_after_a_review_adds_nothing(make_task):
    task = make_task(
        {"title": "t", "goal": "g", "model": {"kind": "scripted", "script": [{"final": "x"}]}}
    )
    event_record(task_id=task.id, type="status", payload={"from": "waiting_review", "to": "queued"})
    state = AgentState(messages=[Message(role="user", content="goal")])
    checkpoint = Checkpoint(task=task, seq=1, level="step", trigger="after_step")
    assert context_align(task_id=task.id, state=state, checkpoint=checkpoint, snapshot=None) is None
    assert len(state.messages) == 1
