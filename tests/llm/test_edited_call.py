"""An edited approval, on real rqworkers with a model behind the OpenAI wire format: the review
records three facts (proposed, approved with who edited it, executed), the page, the calls tab
and the timeline show "edited by" with the diff, and the model's next request carries a tool
result saying its call ran with a reviewer's arguments, and which."""

from __future__ import annotations

import json

import pytest

from tasks.canonical import canonical_hash
from tasks.models import Task
from tests.conftest import page_client

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

PROPOSED = {"path": "app.conf", "content": "port=8080\n"}
EDITED = {"path": "app.conf", "content": "port=9090\n"}


def test_an_edited_approval_records_three_facts_and_the_model_is_told(
    chat_server, workers, task_api, api_client, operator
):
    chat_server.tool_calls(("write_file", PROPOSED))
    chat_server.answer("done")
    created = task_api.create(
        {
            "title": "configure",
            "goal": "Set the port in app.conf",
            "model": {"kind": "openai"},
            "tools": ["write_file"],
        }
    )
    task_api.wait(created["id"], "waiting_review")
    api = api_client(operator)
    (review,) = api.get("/api/v1/reviews", {"status": "pending", "task_id": created["id"]}).json()
    assert review["facts"]["approved"] is None and review["facts"]["edit"] is None

    browser = page_client(operator)
    decided = browser.post(
        f"/reviews/{review['id']}/decide/",
        {
            "decision": "edit",
            "arguments": json.dumps(EDITED),
            "arguments_hash": review["arguments_hash"],
            "target_hash": review["target_fingerprint"].get("hash", ""),
            "comment": "we moved to 9090",
        },
        follow=True,
    )
    assert "write_file: approved with edits." in decided.content.decode()
    task_api.wait(created["id"], "succeeded")

    # What ran is the edit.
    task = Task.objects.get(id=created["id"])
    assert (task.workspace_path / "app.conf").read_text() == "port=9090\n"
    # The API: three facts, each with its hash.
    facts = api.get(f"/api/v1/reviews/{review['id']}").json()["facts"]
    assert facts["proposed"] == {"arguments": PROPOSED, "arguments_hash": canonical_hash(PROPOSED)}
    assert facts["approved"]["arguments"] == EDITED
    assert facts["approved"]["arguments_hash"] == canonical_hash(EDITED)
    assert facts["approved"]["edited"] is True
    assert facts["approved"]["edited_by"] == "operator"
    assert facts["approved"]["comment"] == "we moved to 9090"
    assert facts["executed"]["arguments_hash"] == canonical_hash(EDITED)
    assert facts["executed"]["status"] == "succeeded"
    assert '-  "content": "port=8080\\n",' in facts["edit"]["diff"]
    assert '+  "content": "port=9090\\n",' in facts["edit"]["diff"]

    # The pages: the review, the calls tab and the timeline (events tab) say who edited.
    page = browser.get(f"/reviews/{review['id']}/").content.decode()
    assert "Edited by operator" in page and "we moved to 9090" in page
    assert "port=9090" in page and "port=8080" in page
    for tab in ("calls", "events"):
        html = browser.get(f"/tasks/{created['id']}/", {"tab": tab}).content.decode()
        assert 'data-testid="call-edit"' in html, tab
        assert "edited by operator" in html, tab
        assert "port=9090" in html, tab

    # The model's next request: its call's result says it ran with the reviewer's arguments.
    assert len(chat_server.requests) == 2
    messages = chat_server.requests[1].body["messages"]
    (result,) = [m for m in messages if m["role"] == "tool"]
    assert result["content"].startswith("Note: a reviewer (operator) edited this call")
    assert 'content: "port=8080\\n" -> "port=9090\\n"' in result["content"]
    assert "we moved to 9090" in result["content"]
