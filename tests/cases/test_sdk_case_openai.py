"""Issue #47 item 3 with real workers, for the OpenAI Agents SDK: a task saved as a case replays
green from its recorded model decisions (the agent's model is not asked) with its tools
answered from the recording (they do not run again); a policy that now denies a call turns
the replay red at that step."""

from __future__ import annotations

import pytest

from tasks.models import Task
from tests.cases.oa_case_agents import logged
from tests.cases.test_replay_workers import replay, restart_workers

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

AGENTS = 'openai_agents:\n  pricing: "tests.cases.oa_case_agents:pricing"\n'
RECORDED = ["model0", "lookup", "model1", "notify", "model2"]


def test_an_openai_agents_case_replays_green_and_a_new_deny_turns_it_red(
    harness_dirs, harness_yaml, worker_pool, task_api, api_client, operator
):
    worker_pool.env["HARNESS_CONFIG"] = str(harness_yaml("review_rules: []\n" + AGENTS))
    worker_pool.start(1)
    spec = {
        "title": "widget price",
        "goal": "find the widget's price",
        "agent": {"kind": "openai-agents", "name": "pricing", "input": "price?"},
    }
    done = task_api.run(spec, timeout=120)
    assert done["status"] == "succeeded", done
    assert logged() == RECORDED
    client = api_client(operator)
    saved = client.post(f"/api/v1/tasks/{done['id']}/save-case", {"name": "oa-pricing"})
    assert saved.status_code == 201, saved.content
    case = saved.json()
    assert case["steps"] == 3 and case["calls"] == 2

    report = replay(client, case["id"])
    assert report["passed"], report["failures"]
    assert report["divergence"] is None and all(s["same"] for s in report["steps"])
    # Neither the model nor the tools ran again: the recording answered them.
    assert logged() == RECORDED
    replayed = Task.objects.get(id=report["run"]["task_id"])
    assert replayed.is_replay and replayed.result == done["result"]

    denying = "review_rules:\n  - {name: no-notify, tool: notify, action: deny}\n" + AGENTS
    restart_workers(worker_pool, HARNESS_CONFIG=str(harness_yaml(denying)))
    report = replay(client, case["id"])
    assert not report["passed"]
    assert report["first_divergent_step"] == 2
    divergence = report["divergence"]
    assert divergence["tool"] == "notify" and "denied by policy" in divergence["reason"]
    assert logged() == RECORDED
