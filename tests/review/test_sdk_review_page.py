"""The review page of an SDK agent's call (Pydantic AI, OpenAI Agents SDK) shows what the model
had seen when it asked: the prompt, the calls it made and what they returned, and the call
under review, read from the SDK's own history in the before_review checkpoint
(checkpoints.selectors.agent_messages); and it names the agent's kind, not a LangGraph graph."""

from __future__ import annotations

import re

import pytest

from agent.jobs import run_task
from review.models import ReviewRequest

pytestmark = pytest.mark.django_db(transaction=True)

# The example agents harness.yaml registers: each writes its notes, then asks to publish.
AGENTS = {
    "pydantic-ai": (
        {"name": "release_notes", "input": "v1.5: faster search"},
        "Pydantic AI",
        r"wrote \d+ characters to notes/release\.md",
    ),
    "openai-agents": (
        {"name": "release_writer"},
        "OpenAI Agents SDK",
        r"wrote \d+ characters to NOTES\.md",
    ),
}


@pytest.mark.parametrize("kind", sorted(AGENTS))
def test_the_review_of_an_sdk_call_shows_the_agent_s_recent_messages(
    kind, task_api, operator, as_user
):
    agent, label, returned = AGENTS[kind]
    created = task_api.create(
        {"title": "notes", "goal": "write the notes", "agent": {"kind": kind, **agent}}
    )
    assert run_task(created["id"]) == "paused"
    review = ReviewRequest.objects.get(task_id=created["id"], status="pending")
    assert review.tool == "publish"

    page = as_user(operator).get(f"/reviews/{review.id}/").content.decode()
    log = page.partition('data-testid="recent-messages"')[2].partition("</ol>")[0]
    roles = re.findall(r'class="msg-role-(\w+)"', log)
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert re.search(returned, log)  # what the first call returned
    assert log.rfind("publish(") > log.find("write_note")  # the call under review comes last
    assert f"A call of a {label} agent waiting for approval" in page
    assert "LangGraph interrupt" not in page
