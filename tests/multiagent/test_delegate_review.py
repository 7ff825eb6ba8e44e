"""`delegate` calls meet the review policy like any other call, on real workers: a reviewed one
starts its child only once approved, a denied one never starts it."""

from __future__ import annotations

import pytest

from tasks.models import Task
from tests.durable.conftest import TEST_CONFIG
from tests.multiagent.conftest import agent, delegate, group_spec

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_a_reviewed_delegation_starts_its_child_only_once_approved(fleet, task_api, wait_for):
    fleet.worker(2)
    parent = task_api.create(
        group_spec(
            delegate("scout", "look around", area="north"),
            {"final": "ok"},
            agents={"scout": agent({"final": "all quiet"})},
            review={"always": ["delegate"]},
        )
    )
    api = task_api.client
    task_api.wait(parent["id"], "waiting_review", timeout=30)
    reviews = api.get("/api/v1/reviews?status=pending").json()
    assert [(r["task_id"], r["tool"]) for r in reviews] == [(parent["id"], "delegate")]
    assert reviews[0]["arguments"]["agent"] == "scout"
    # Nothing started before the decision.
    assert not Task.objects.filter(parent_id=parent["id"]).exists()

    response = api.post(
        f"/api/v1/reviews/{reviews[0]['id']}/decision",
        {"decision": "approve", "arguments_hash": reviews[0]["arguments_hash"]},
    )
    assert response.status_code == 200, response.content
    done = task_api.wait(parent["id"], "succeeded", timeout=60)
    assert len(done["children"]) == 1
    assert task_api.get(done["children"][0])["result"] == "all quiet"
    call = Task.objects.get(id=parent["id"]).tool_calls.get(tool="delegate")
    assert call.status == "succeeded" and call.result["answer"] == "all quiet"


@pytest.mark.parametrize(
    "harness_config_text",
    [TEST_CONFIG + "review_rules:\n  - {name: no-helpers, tool: delegate, action: deny}\n"],
)
def test_a_denied_delegation_never_starts_its_child(fleet, task_api):
    fleet.worker(1)
    done = task_api.run(
        group_spec(
            delegate("scout", "look around"),
            {"final": "did it alone"},
            agents={"scout": agent({"final": "all quiet"})},
        ),
        timeout=60,
    )
    assert done["children"] == []
    call = Task.objects.get(id=done["id"]).tool_calls.get(tool="delegate")
    assert call.status == "denied"
    assert "no-helpers" in call.error_message or "denied by policy" in call.error_message
