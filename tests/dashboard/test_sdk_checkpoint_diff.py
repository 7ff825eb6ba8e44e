"""Comparing two checkpoints of an SDK agent's task (Pydantic AI, OpenAI Agents SDK): the
messages between them are the agent's own history read as messages (its `sdk` history is
not JSON to compare), and the rest of its SDK state still shows when it changes."""

from __future__ import annotations

import pytest

from agent.jobs import run_task
from checkpoints.models import Checkpoint
from checkpoints.selectors import checkpoint_diff

pytestmark = pytest.mark.django_db(transaction=True)

AGENTS = {
    "pydantic-ai": {"name": "release_notes", "input": "v1.5: faster search"},
    "openai-agents": {"name": "release_writer"},
}


@pytest.mark.parametrize("kind", sorted(AGENTS))
def test_the_diff_of_an_sdk_task_s_checkpoints_lists_the_messages_between_them(
    kind, task_api, operator, as_user
):
    created = task_api.create(
        {"title": "notes", "goal": "write the notes", "agent": {"kind": kind, **AGENTS[kind]}}
    )
    assert run_task(created["id"]) == "paused"
    checkpoints = list(Checkpoint.objects.filter(task_id=created["id"]).order_by("seq"))
    first_turn = next(c for c in checkpoints if c.trigger == "after_model")
    paused = checkpoints[-1]
    assert paused.trigger == "before_review"

    diff = checkpoint_diff(a=first_turn, b=paused)
    a = diff.messages_only_a
    b = diff.messages_only_b
    if kind == "pydantic-ai":
        assert diff.messages_common == 2  # the prompt and the first call
        assert not a
        assert [m["role"] for m in b] == ["tool", "assistant"]
    else:
        # Between pauses the OpenAI adapter keeps only the model's responses: the first
        # turn's call is all there is to read of it; the pause holds the whole RunState.
        assert [[c["tool"] for c in m["calls"]] for m in a] == [["write_notes"]]
        assert [m["role"] for m in b] == ["user", "assistant", "tool", "assistant"]
    assert [c["tool"] for c in b[-1]["calls"]] == ["publish"]
    sdk = next((c for c in diff.state_changes if c["field"] == "sdk"), None)
    if sdk is not None:  # only what is not its history
        assert not {"messages", "run_state"} & (set(sdk["a"]) | set(sdk["b"]))

    page = as_user(operator).get(
        f"/tasks/{created['id']}/checkpoints/diff/?a={first_turn.id}&b={paused.id}"
    )
    assert page.status_code == 200
    assert "publish" in page.content.decode()
