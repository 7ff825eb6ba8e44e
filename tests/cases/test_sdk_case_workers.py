"""Issue #47 item 3 with real workers: a Pydantic AI task saved as a case replays green with its
recorded model decisions (the agent's model is not asked) and the recorded answer of its
external tool (which does not run again); when its read tool's answer changes, the replay turns
red at that step, the two answers and their diff shown. Tasks a replay cannot play back yet
(LangGraph) are refused with a 4xx naming why."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent.replay_suite import replay_one
from cases.models import Case
from tasks.models import Task
from tests.cases.test_replay_workers import replay, restart_workers
from tests.conftest import ApiClient, page_client
from tests.durable.pai_agents import runs
from tests.factories import spec_task

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

CONFIG = 'review_rules: []\npydantic_ai_agents:\n  pricing: "tests.cases.pai_case_agents:pricing"\n'
RECORDED_RUNS = ["model0", "lookup", "model1", "write", "model2", "notify", "model3"]


def pricing_spec(marker_dir) -> dict[str, Any]:
    return {
        "title": "widget price",
        "goal": "find the widget's price",
        "agent": {
            "kind": "pydantic-ai",
            "name": "pricing",
            "input": json.dumps({"marker_dir": str(marker_dir)}),
        },
    }


@pytest.fixture
def pai_case(harness_dirs, harness_yaml, worker_pool, task_api, api_client, operator, tmp_path):
    """A worker on an open policy; the pricing agent's task run by it and saved as a case."""
    worker_pool.env["HARNESS_CONFIG"] = str(harness_yaml(CONFIG))
    worker_pool.start(1)
    marker_dir = tmp_path / "markers"
    marker_dir.mkdir()
    done = task_api.run(pricing_spec(marker_dir), timeout=120)
    assert done["status"] == "succeeded", done
    assert runs(marker_dir) == RECORDED_RUNS
    client = api_client(operator)
    # Saved from the task page's button, as for the harness's own tasks.
    page = page_client(operator)
    assert b'data-testid="save-case-button"' in page.get(f"/tasks/{done['id']}/").content
    saved = page.post(f"/tasks/{done['id']}/save-case/", {"name": "pricing"})
    assert saved.status_code == 302, saved.content
    case = client.get(f"/api/v1/cases/{Case.objects.get(name='pricing').id}").json()
    assert case["steps"] == 4 and case["calls"] == 3
    return {"case": case, "client": client, "pool": worker_pool, "markers": marker_dir}


def test_a_pydantic_ai_case_replays_green_from_its_recorded_decisions(pai_case, operator):
    report = replay(pai_case["client"], pai_case["case"]["id"])
    assert report["passed"], report["failures"]
    assert report["divergence"] is None and report["first_divergent_step"] is None
    assert len(report["steps"]) == 4 and all(s["same"] for s in report["steps"])
    assert report["files"] == []
    # The model was not asked again; the read and write tools ran in the replay, the
    # external one was answered from the recording.
    assert runs(pai_case["markers"]) == [*RECORDED_RUNS, "lookup", "write"]
    replayed = Task.objects.get(id=report["run"]["task_id"])
    assert replayed.is_replay and replayed.result == "the widget costs sent"
    assert (replayed.workspace_path / "price.txt").read_text() == "42"

    # `harness replay` (the suite, in this process) replays it the same way.
    row = replay_one(
        case=Case.objects.get(id=pai_case["case"]["id"]),
        model=None,
        on_divergence="stop",
        user=operator,
    )
    assert row.passed, row.report["failures"]
    assert runs(pai_case["markers"])[-2:] == ["lookup", "write"]


def test_a_changed_tool_answer_turns_the_pydantic_ai_case_red_with_the_diff(pai_case, operator):
    restart_workers(pai_case["pool"], PAI_CASE_PRICE="43")
    report = replay(pai_case["client"], pai_case["case"]["id"])
    assert not report["passed"]
    assert report["first_divergent_step"] == 1
    divergence = report["divergence"]
    assert divergence["tool"] == "lookup" and divergence["args"] == {"item": "widget"}
    assert "answer changed" in divergence["reason"], divergence
    assert divergence["answer"]["recorded"] == "42" and divergence["answer"]["now"] == "43"
    assert '-  "answer": "42"' in divergence["answer"]["diff"]
    assert '+  "answer": "43"' in divergence["answer"]["diff"]
    assert any("diverged at step 1" in f for f in report["failures"])
    # Stopped there: nothing after the changed answer ran, the model was not asked.
    assert runs(pai_case["markers"]) == [*RECORDED_RUNS, "lookup"]
    page = page_client(operator).get(f"/cases/runs/{report['run']['id']}/")
    assert page.status_code == 200
    assert b'data-testid="replay-answer-diff"' in page.content
    # A candidate model is refused for an SDK agent's case: its model is the agent's code.
    refused = pai_case["client"].post(
        f"/api/v1/cases/{pai_case['case']['id']}/replay", {"model": {"kind": "scripted"}}
    )
    assert refused.status_code == 422, refused.content


@pytest.mark.parametrize(
    ("agent", "named"),
    [
        ({"kind": "langgraph", "graph": "release_bot"}, "LangGraph"),
    ],
)
def test_kinds_a_replay_cannot_play_back_are_refused_naming_why(operator, agent, named):
    task = spec_task({"title": "t", "goal": "g", "agent": agent}, enqueue=False)
    Task.objects.filter(id=task.id).update(status="succeeded")
    response = ApiClient(operator).post(f"/api/v1/tasks/{task.id}/save-case", {"name": "x"})
    assert response.status_code == 409, response.content
    assert named in response.json()["detail"]
    assert not Case.objects.exists()
    # The task page says so instead of offering a form that would be refused.
    page = page_client(operator).get(f"/tasks/{task.id}/").content.decode()
    assert 'data-testid="save-case-unavailable"' in page and named in page
    assert 'data-testid="save-case-button"' not in page
