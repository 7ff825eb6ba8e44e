"""A Pydantic AI external call (a tool raising CallDeferred) is answered only through the
review gate: a viewer cannot answer it (API and page), an answer is a `respond` with a bounded
result (approve or edit would have nothing to run and are refused; no message about it carries
an Approve button or link), and an approval's review cannot be answered with a made-up result
instead of running its tool."""

from __future__ import annotations

import json

import pytest
from django.core import mail
from django.utils import timezone

from agent.jobs import run_task
from harness_base.config import EmailChannelConfig
from review.models import ReviewRequest
from review.notifications import review_message
from review.transports import Email
from review.transports.slack import slack_blocks
from tasks.canonical import canonical_hash
from tasks.models import ToolCall
from tests.conftest import page_client
from tests.durable.pai_agents import runs
from tests.factories import ReviewRuleFactory, UserFactory

pytestmark = pytest.mark.django_db(transaction=True)

CONFIG = """
timeouts: {session_s: 600, turn_s: 60, tool_s: 30}
pydantic_ai_agents:
  external: "tests.durable.pai_agents:external"
  release_notes: "examples.pydantic_ai_agent:agent"
"""


@pytest.fixture(autouse=True)
def _config(harness_yaml, harness_dirs) -> None:
    harness_yaml(CONFIG)


def external_task(task_api, marker_dir) -> dict:
    spec = {
        "title": "stock",
        "goal": "ask",
        "agent": {
            "kind": "pydantic-ai",
            "name": "external",
            "input": json.dumps({"marker_dir": str(marker_dir)}),
        },
    }
    return task_api.create(spec)


def test_only_an_operator_answers_an_external_call_and_only_with_a_result(
    task_api, api_client, operator, viewer, tmp_path
):
    task = external_task(task_api, tmp_path)
    assert run_task(task["id"]) == "paused"
    review = ReviewRequest.objects.get(task_id=task["id"], status="pending")
    assert review.interrupt["mode"] == "external"

    as_viewer = api_client(viewer).decide(review.id, decision="respond", response="999 left")
    assert as_viewer.status_code == 403
    page = page_client(viewer).post(
        f"/reviews/{review.id}/decide/", {"decision": "respond", "response": "999 left"}
    )
    assert page.status_code == 403
    api = api_client(operator)
    shown = canonical_hash(review.original_arguments)
    refused = [
        api.decide(review.id, decision="approve", arguments_hash=shown),
        api.decide(review.id, decision="approve", arguments_hash=shown, arguments={"sku": "sku-9"}),
        api.decide(review.id, decision="respond"),
        api.decide(review.id, decision="respond", response="x" * 100_001),
    ]
    assert [r.status_code for r in refused] == [422] * 4, [r.content for r in refused]
    review.refresh_from_db()
    assert review.status == "pending"
    assert ToolCall.objects.get(task_id=task["id"]).status == "awaiting_review"

    assert api.decide(review.id, decision="respond", response="12 left").status_code == 200
    assert run_task(task["id"]) == "paused"  # the agent asks its next question
    first = ToolCall.objects.filter(task_id=task["id"]).order_by("id").first()
    assert first.result == {"value": "12 left", "answered_by": "operator"}
    assert runs(tmp_path) == ["ask:sku-0", "ask:sku-1"]  # an answer never runs the tool


def test_an_approval_cannot_be_answered_with_a_result_instead_of_running(
    task_api, api_client, operator
):
    task = task_api.create(
        {
            "title": "notes",
            "goal": "write and publish the notes",
            "agent": {"kind": "pydantic-ai", "name": "release_notes"},
        }
    )
    assert run_task(task["id"]) == "paused"
    review = ReviewRequest.objects.get(task_id=task["id"])
    answered = api_client(operator).decide(review.id, decision="respond", response="published")
    assert answered.status_code == 422
    review.refresh_from_db()
    assert review.status == "pending"
    assert ToolCall.objects.get(task_id=task["id"], tool="publish").status == "awaiting_review"


def test_no_message_about_an_external_call_offers_to_approve_it(task_api, operator, tmp_path):
    task = external_task(task_api, tmp_path)
    assert run_task(task["id"]) == "paused"
    review = ReviewRequest.objects.get(task_id=task["id"], status="pending")
    message = review_message(review=review, event="review.requested", now=timezone.now())

    (actions,) = [b for b in slack_blocks(message) if b["type"] == "actions"]
    assert [e["action_id"] for e in actions["elements"]] == ["review_reject", "review_open"]
    operator.email = "ops@example.com"
    operator.save(update_fields=["email"])
    Email(EmailChannelConfig(kind="email", to=["ops@example.com"])).notify(
        message=message, delivery_id="d1"
    )
    [sent] = mail.outbox
    assert "Reject:" in sent.body and "Approve" not in sent.body
    assert "Approve" not in sent.alternatives[0][0]


def test_under_a_four_eyes_rule_the_task_s_creator_cannot_answer_its_external_call(
    task_api, api_client, operator, tmp_path
):
    ReviewRuleFactory(tool="ask_warehouse", forbid_creator=True)
    task = external_task(task_api, tmp_path)  # created by `operator`
    other = UserFactory(username="operator2", roles=["operators"])
    # Our rule reviews the call before the tool runs; approved, the tool defers it.
    assert run_task(task["id"]) == "paused"
    asked = ReviewRequest.objects.get(task_id=task["id"], status="pending")
    assert asked.interrupt["mode"] == "per_call"
    assert api_client(other).decide(asked.id, decision="approve").status_code == 200
    assert run_task(task["id"]) == "paused"
    review = ReviewRequest.objects.get(task_id=task["id"], status="pending")
    assert review.interrupt["mode"] == "external" and review.forbid_creator

    own = api_client(operator).decide(review.id, decision="respond", response="plenty")
    assert own.status_code == 403, own.content
    review.refresh_from_db()
    assert review.status == "pending"
    assert api_client(other).decide(review.id, decision="respond", response="3").status_code == 200
    assert ToolCall.objects.get(task_id=task["id"]).result == {
        "value": "3",
        "answered_by": "operator2",
    }
