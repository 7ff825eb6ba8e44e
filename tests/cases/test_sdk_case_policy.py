"""Issue #47 item 3 with real workers, the policy side of a Pydantic AI case: a call a person
approved in the recorded run replays without waiting for anyone (the recorded decision stands,
the tool is answered from the recording and does not run again); a policy that now denies the
call turns the replay red at that step, naming the refusal."""

from __future__ import annotations

import pytest

from review.models import ReviewRequest
from tests.cases.test_replay_workers import replay, restart_workers
from tests.cases.test_sdk_case_workers import RECORDED_RUNS, pricing_spec
from tests.conftest import wait_for
from tests.durable.pai_agents import runs

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

AGENTS = 'pydantic_ai_agents:\n  pricing: "tests.cases.pai_case_agents:pricing"\n'
REVIEWED = "review_rules:\n  - {name: ask-external, risk: external, action: review}\n" + AGENTS
DENIED = "review_rules:\n  - {name: no-notify, tool: notify, action: deny}\n" + AGENTS


@pytest.fixture
def reviewed_case(
    harness_dirs, harness_yaml, worker_pool, task_api, api_client, operator, tmp_path
):
    """The pricing task run with its external call reviewed and approved, saved as a case."""
    worker_pool.env["HARNESS_CONFIG"] = str(harness_yaml(REVIEWED))
    worker_pool.start(1)
    markers = tmp_path / "markers"
    markers.mkdir()
    created = task_api.create(pricing_spec(markers))
    task_api.wait(created["id"], "waiting_review", timeout=120)
    review = wait_for(
        lambda: ReviewRequest.objects.filter(task_id=created["id"], status="pending").first(),
        message="the review of notify",
    )
    assert review.tool == "notify"
    client = api_client(operator)
    decided = client.decide(review.id, decision="approve")
    assert decided.status_code == 200, decided.content
    task_api.wait(created["id"], "succeeded", timeout=120)
    assert runs(markers) == RECORDED_RUNS
    saved = client.post(f"/api/v1/tasks/{created['id']}/save-case", {"name": "reviewed"})
    assert saved.status_code == 201, saved.content
    return {"case": saved.json(), "client": client, "pool": worker_pool, "markers": markers}


def test_a_reviewed_call_replays_without_waiting_and_a_new_deny_turns_it_red(
    reviewed_case, harness_yaml
):
    client, case_id = reviewed_case["client"], reviewed_case["case"]["id"]
    report = replay(client, case_id)
    assert report["passed"], report["failures"]
    assert report["run"]["status"] == "succeeded"
    assert not ReviewRequest.objects.filter(task_id=report["run"]["task_id"]).exists()
    # notify (external, approved in the recording) did not run again.
    assert runs(reviewed_case["markers"]) == [*RECORDED_RUNS, "lookup", "write"]

    restart_workers(reviewed_case["pool"], HARNESS_CONFIG=str(harness_yaml(DENIED)))
    report = replay(client, case_id)
    assert not report["passed"]
    assert report["first_divergent_step"] == 3
    divergence = report["divergence"]
    assert divergence["tool"] == "notify" and "denied by policy" in divergence["reason"]
    assert divergence["recorded"]["status"] == "succeeded"
    assert runs(reviewed_case["markers"]).count("notify") == 1
