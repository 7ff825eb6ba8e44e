"""A plan's approval binds exactly the plan shown (issue #46): a stale or missing `plan_hash` is
refused and approves nothing; a call the approved plan does not cover never runs on the plan's
approval, even where the policy alone would let it run; an item a deny rule matches cannot be
approved inside a plan; only operators decide a plan."""

from __future__ import annotations

from typing import Any

import pytest

from review.models import ReviewRequest
from tasks.models import Task
from tests.conftest import page_client
from tests.factories import ReviewRuleFactory, run_in_process, scripted_task

pytestmark = pytest.mark.django_db

SCRIPT: list[dict[str, Any]] = [
    {"call": "write_file", "args": {"path": "a.txt", "content": "alpha\n"}},
    {"final": "done"},
]


@pytest.fixture(autouse=True)
def _dirs(harness_dirs) -> None:
    pass


def plan_review(script: list[dict[str, Any]] = SCRIPT) -> tuple[Task, ReviewRequest]:
    task = scripted_task(script, ["write_file"], mode="plan")
    assert run_in_process(task) == "paused"
    return task, ReviewRequest.objects.get(task=task, kind="plan")


def decide(client, review: ReviewRequest, body: dict[str, Any]):
    return client.post(f"/api/v1/reviews/{review.id}/decision", body)


def test_a_stale_or_missing_plan_hash_approves_nothing(api_client, operator):
    task, review = plan_review()
    client = api_client(operator)
    stale = decide(client, review, {"decision": "approve", "plan_hash": "0" * 64})
    assert stale.status_code == 409
    assert stale.json()["errors"][0]["field"] == "plan_hash"
    missing = decide(client, review, {"decision": "approve"})
    assert missing.status_code == 422
    assert missing.json()["errors"][0]["field"] == "plan_hash"
    review.refresh_from_db()
    assert review.status == "pending" and not review.approvals.exists()
    assert Task.objects.get(id=task.id).status == "waiting_review"


def test_a_call_outside_the_plan_is_not_approved_by_it(api_client, operator):
    task, review = plan_review()
    client = api_client(operator)
    plan_hash = client.get(f"/api/v1/reviews/{review.id}").json()["plan_hash"]
    assert (
        decide(client, review, {"decision": "approve", "plan_hash": plan_hash}).status_code == 200
    )
    # The model writes another file than planned: the policy alone allows write_file.
    script = [{"call": "write_file", "args": {"path": "evil.txt", "content": "x\n"}}, *SCRIPT]
    spec = {**task.spec, "model": {**task.spec["model"], "script": script}}
    Task.objects.filter(id=task.id).update(spec=spec)
    assert run_in_process(task) == "paused"
    assert not (task.workspace_path / "evil.txt").exists()
    pending = ReviewRequest.objects.get(task=task, status="pending")
    assert pending.tool == "write_file" and "not in the plan" in pending.reason


def test_an_item_a_deny_rule_matches_cannot_be_approved(api_client, operator):
    task, review = plan_review()
    ReviewRuleFactory(name="no-a", tool="write_file", path_glob="a.txt", action="deny")
    client = api_client(operator)
    plan_hash = client.get(f"/api/v1/reviews/{review.id}").json()["plan_hash"]
    response = decide(client, review, {"decision": "approve", "plan_hash": plan_hash})
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "items.1"
    review.refresh_from_db()
    assert review.status == "pending"
    # Rejected, with a reason, it may go.
    response = decide(
        client,
        review,
        {
            "decision": "approve",
            "plan_hash": plan_hash,
            "items": {"1": {"decision": "reject", "comment": "denied"}},
        },
    )
    assert response.status_code == 200


def test_an_edit_inside_a_plan_meets_the_same_gate(api_client, operator):
    _task, review = plan_review()
    ReviewRuleFactory(name="no-etc", tool="write_file", path_glob="etc/*", action="deny")
    client = api_client(operator)
    plan_hash = client.get(f"/api/v1/reviews/{review.id}").json()["plan_hash"]
    edit = {"decision": "edit", "arguments": {"path": "etc/passwd", "content": "x"}}
    response = decide(
        client, review, {"decision": "approve", "plan_hash": plan_hash, "items": {"1": edit}}
    )
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"].startswith("items.1")


def test_a_viewer_cannot_decide_a_plan(api_client, viewer):
    _task, review = plan_review()
    response = decide(api_client(viewer), review, {"decision": "reject"})
    assert response.status_code == 403


def test_a_plan_is_not_approved_as_one_call_in_bulk_or_on_the_call_form(api_client, operator):
    task, review = plan_review()
    client = api_client(operator)
    arguments_hash = client.get(f"/api/v1/reviews/{review.id}").json()["arguments_hash"]
    bulk = client.post(
        "/api/v1/reviews/bulk-decision",
        {"decision": "approve", "items": [{"id": review.id, "arguments_hash": arguments_hash}]},
    )
    assert bulk.status_code == 200 and bulk.json()["results"][0]["ok"] is False
    page = page_client(operator).post(
        f"/reviews/{review.id}/decide/", {"decision": "approve", "arguments_hash": arguments_hash}
    )
    assert page.status_code == 422
    review.refresh_from_db()
    assert review.status == "pending" and not review.approvals.exists()
    assert Task.objects.get(id=task.id).status == "waiting_review"


def test_an_edited_item_whose_new_target_changed_after_the_decision_does_not_run(
    api_client, operator
):
    """The reviewer points the plan's write at another file; that file changes after the
    decision: the edited write must not run on the plan's approval (it pauses naming it)."""
    task, review = plan_review()
    client = api_client(operator)
    plan_hash = client.get(f"/api/v1/reviews/{review.id}").json()["plan_hash"]
    edit = {"path": "other.txt", "content": "edited\n"}
    response = decide(
        client,
        review,
        {
            "decision": "approve",
            "plan_hash": plan_hash,
            "items": {"1": {"decision": "edit", "arguments": edit}},
        },
    )
    assert response.status_code == 200, response.content
    task.workspace_path.mkdir(parents=True, exist_ok=True)
    (task.workspace_path / "other.txt").write_text("someone else's\n")
    assert run_in_process(task) == "paused"
    assert (task.workspace_path / "other.txt").read_text() == "someone else's\n"
    departure = ReviewRequest.objects.get(task=task, status="pending")
    assert departure.tool == "write_file" and departure.arguments == edit
    assert "edited plan item 1" in departure.reason and "changed" in departure.reason
    plan = client.get(f"/api/v1/tasks/{task.id}/plan").json()
    assert plan["items"][0]["state"] == "departed"
