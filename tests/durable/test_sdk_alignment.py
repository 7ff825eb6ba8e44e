"""After a rollback, an SDK agent (Pydantic AI, OpenAI Agents SDK) run by a real rqworker is
told what was undone in the words the native loop uses (checkpoints.alignment): its first
model request after the rollback holds the `[harness]` summary naming the undone call and
file, and the timeline's context_aligned event carries the same summary."""

from __future__ import annotations

import json
import uuid

import pytest

from checkpoints.models import Checkpoint
from checkpoints.recovery import checkpoint_rollback
from tests.factories import spec_task

from .conftest import TEST_CONFIG, wait_status
from .graphs import workspace_files
from .sdk_agents import oa_requests, pai_requests

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def harness_config_text() -> str:
    return TEST_CONFIG + (
        'pydantic_ai_agents:\n  aligned: "tests.durable.sdk_agents:pai_aligned"\n'
        'openai_agents:\n  aligned: "tests.durable.sdk_agents:oa_aligned"\n'
    )


def _told_after_rollback(requests: list[dict], turn: int) -> str:
    """The alignment the model was given in the first request after the rollback: the first
    request at `turn` that carries one (the run before the rollback carried none)."""
    before = [r for r in requests if r["told"]]
    assert before, f"no request after the rollback told the model anything: {requests}"
    assert before[0]["turn"] == turn
    assert len(before[0]["told"]) == 1
    return before[0]["told"][0]


def _assert_names_what_was_undone(text: str, *, call: str) -> None:
    assert text.startswith("[harness] This task was rolled back by operator (reason: redo b)")
    undone = text.split("Undone: ", 1)[1].split(". ", 1)[0]
    assert "files deleted b.txt" in undone
    assert call in undone
    # Steps done before the checkpoint are named as such (from the ledger), not "none".
    assert "Steps completed: 1. write" in text
    assert json.loads(text.split("\n\n", 1)[1])["kind"] == "rollback"


def test_a_pydantic_ai_agent_is_told_what_the_rollback_undid(fleet, tmp_path, operator):
    fleet.worker(1)
    spec = {
        "title": "aligned",
        "goal": "write two files",
        "agent": {
            "kind": "pydantic-ai",
            "name": "aligned",
            "input": json.dumps({"marker_dir": str(tmp_path)}),
        },
    }
    task = wait_status(spec_task(spec, enqueue=True).id, "succeeded")
    assert workspace_files(task.workspace_path) == {"a.txt": "a1", "b.txt": "b1"}
    assert all(not r["told"] for r in pai_requests(tmp_path))

    # Back to the end of step 1 (a.txt written, b.txt not yet), and on.
    first_step = Checkpoint.objects.get(task=task, trigger="after_step", step_index=1)
    checkpoint_rollback(
        task_id=task.id, checkpoint_id=first_step.id, user=operator, reason="redo b", resume=True
    )
    task = wait_status(task.id, "succeeded")
    assert workspace_files(task.workspace_path) == {"a.txt": "a1", "b.txt": "b1"}
    requests = pai_requests(tmp_path)
    assert [r["turn"] for r in requests] == [0, 1, 2, 1, 2]
    text = _told_after_rollback(requests, turn=1)
    _assert_names_what_was_undone(text, call="write")
    # It stays in the history the agent goes on with (the next request holds it too).
    assert requests[-1]["told"] == [text]
    aligned = task.events.get(type="context_aligned").payload
    assert aligned["undone"]["files_deleted"] == ["b.txt"]
    assert aligned["steps_completed"][0]["calls"][0]["tool"] == "write"


def test_an_openai_agents_sdk_agent_is_told_what_the_rollback_undid(fleet, operator):
    fleet.worker(1)
    key = uuid.uuid4().hex
    spec = {
        "title": "aligned",
        "goal": f"task {key}: write two files",
        "agent": {"kind": "openai-agents", "name": "aligned"},
    }
    task = wait_status(spec_task(spec, enqueue=True).id, "succeeded")
    assert sorted(p.name for p in task.workspace_path.iterdir()) == ["a.txt", "b.txt"]
    assert all(not r["told"] for r in oa_requests(key))

    # Back to turn 1's response (write b.txt pending; it ran after this checkpoint), and on.
    target = Checkpoint.objects.get(task=task, trigger="after_model", step_index=2)
    checkpoint_rollback(
        task_id=task.id, checkpoint_id=target.id, user=operator, reason="redo b", resume=True
    )
    task = wait_status(task.id, "succeeded")
    assert sorted(p.name for p in task.workspace_path.iterdir()) == ["a.txt", "b.txt"]
    requests = oa_requests(key)
    assert [r["turn"] for r in requests] == [0, 1, 2, 2]
    text = _told_after_rollback(requests, turn=2)
    _assert_names_what_was_undone(text, call="write_file")
    aligned = task.events.get(type="context_aligned").payload
    assert aligned["undone"]["files_deleted"] == ["b.txt"]
