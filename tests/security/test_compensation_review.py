"""A rollback's compensation is a reviewed, recorded call (THREATS: "a compensation named in
configuration ... never run unseen"): the undo of a call a person reviewed pauses for review
even when no rule reviews the compensating tool, and runs only once approved."""

from __future__ import annotations

import json

import pytest

from checkpoints import recovery
from review.models import ReviewRequest
from tasks.models import ToolCall
from tests.checkpoints.conftest import NO_REVIEW_CONFIG, checkpoint_after_step, spec_dict
from tests.conftest import ApiClient
from tests.factories import run_in_process, spec_task

pytestmark = pytest.mark.django_db(transaction=True)

# Opening a ticket is reviewed; closing one matches no rule.
CONFIG = NO_REVIEW_CONFIG.replace(
    "review_rules: []", "review_rules:\n  - {name: tickets, tool: open_ticket, action: review}"
)


@pytest.fixture(autouse=True)
def _tickets(settings, harness_dirs, harness_yaml, tmp_path, monkeypatch):
    settings.HARNESS_BLOB_DIR = harness_dirs / "blobs"
    settings.HARNESS_TOOL_MODULES = ["examples.ticket_tools"]
    monkeypatch.setenv("HARNESS_EXAMPLE_TRACKER", str(tmp_path / "tracker.json"))
    harness_yaml(CONFIG)


def ticket_status(tmp_path) -> str:
    return json.loads((tmp_path / "tracker.json").read_text())["tickets"][0]["status"]


def approve_pending(task, operator) -> ReviewRequest:
    review = ReviewRequest.objects.get(task=task, status="pending")
    response = ApiClient(operator).decide(review.id, decision="approve")
    assert response.status_code == 200, response.content
    return review


def test_the_undo_of_a_reviewed_call_waits_for_a_person(operator, tmp_path):
    task = spec_task(
        spec_dict(
            {"call": "write_file", "args": {"path": "a.txt", "content": "1"}},
            {"call": "open_ticket", "args": {"title": "API down", "severity": 1}},
            {"final": "filed"},
            tools=["write_file", "open_ticket"],
        ),
        user=operator,
    )
    assert run_in_process(task) == "paused"
    approve_pending(task, operator)
    assert run_in_process(task) == "succeeded", task.error_message
    opened = ToolCall.objects.get(task=task, tool="open_ticket")

    recovery.checkpoint_rollback(
        task_id=task.id,
        checkpoint_id=checkpoint_after_step(task, 1).id,
        user=operator,
        reason="wrong outage",
        resume=False,
    )
    assert run_in_process(task) == "paused"
    assert task.status == "waiting_review"
    review = ReviewRequest.objects.get(task=task, status="pending")
    assert review.tool_call.call_id == f"{opened.call_id}~undo"
    assert [r["name"] for r in review.matched_rules] == ["compensation-of-reviewed-call"]
    assert ticket_status(tmp_path) == "open"  # nothing ran unseen

    approve_pending(task, operator)
    assert run_in_process(task) == "paused"  # held after its compensations, as asked
    assert task.status == "held"
    assert ticket_status(tmp_path) == "closed"
