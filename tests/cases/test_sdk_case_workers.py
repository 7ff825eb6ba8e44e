"""Issue #47 item 3 with real workers: a Pydantic AI task saved as a case replays green with its
recorded model decisions (the agent's model is not asked) and the recorded answer of its
external tool (which does not run again); when its read tool's answer changes, the replay turns
red at that step, the two answers and their diff shown (a graph's: test_graph_case_workers)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent.replay_suite import replay_one
from cases.models import Case
from tasks.models import Task
from tests.cases.test_replay_workers import (
    assert_green,
    assert_red_at_the_lookup,
    replay,
    restart_workers,
    saved_from_page,
)
from tests.durable.pai_agents import runs

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
    case = saved_from_page(operator, client, done["id"], "pricing")
    assert case["steps"] == 4 and case["calls"] == 3
    return {"case": case, "client": client, "pool": worker_pool, "markers": marker_dir}


def test_a_pydantic_ai_case_replays_green_from_its_recorded_decisions(pai_case, operator):
    report = replay(pai_case["client"], pai_case["case"]["id"])
    assert_green(report, steps=4)
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
    assert_red_at_the_lookup(report, operator)
    # Stopped there: nothing after the changed answer ran, the model was not asked.
    assert runs(pai_case["markers"]) == [*RECORDED_RUNS, "lookup"]
    # A candidate model is refused for an SDK agent's case: its model is the agent's code.
    refused = pai_case["client"].post(
        f"/api/v1/cases/{pai_case['case']['id']}/replay", {"model": {"kind": "scripted"}}
    )
    assert refused.status_code == 422, refused.content
