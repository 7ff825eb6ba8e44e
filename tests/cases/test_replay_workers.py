"""Issue #31 with real workers: a 20-step task saved as a case replays green against unchanged
code; a changed policy or tool schema fails it at the step it changes, the divergence shown; a
candidate model that takes another path is reported at its first divergent call, and that call
has no side effect."""

from __future__ import annotations

from typing import Any

import pytest

from agent.tools.testing import ledger_records
from cases.models import Case
from tasks.models import Task
from tests.cases.conftest import OPEN_POLICY, twenty_step_spec, twenty_steps
from tests.conftest import TERMINAL, page_client, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def recorded(harness_dirs, harness_yaml, stamp_tools, worker_pool, task_api, api_client, operator):
    """Workers on an open policy and schema v1; the 20-step task run by them and saved."""
    worker_pool.env["HARNESS_CONFIG"] = str(harness_yaml(OPEN_POLICY))
    worker_pool.env["HARNESS_TOOL_MODULES"] = "tests.cases.stamp_tools"
    worker_pool.start(1)
    done = task_api.run(twenty_step_spec(), timeout=120)
    assert done["status"] == "succeeded", done
    client = api_client(operator)
    saved = client.post(
        f"/api/v1/tasks/{done['id']}/save-case", {"name": "twenty", "tags": ["smoke"]}
    )
    assert saved.status_code == 201, saved.content
    case = saved.json()
    assert case["steps"] == 20 and case["calls"] == 19
    return {"task": done, "case": case, "client": client, "pool": worker_pool}


def restart_workers(pool, **env: str) -> None:
    pool.stop()
    pool.env.update(env)
    pool.start(1)


def saved_from_page(operator, client, task_id: str, name: str) -> dict[str, Any]:
    """The finished task saved from its page's button, as an operator does: the case (API)."""
    page = page_client(operator)
    assert b'data-testid="save-case-button"' in page.get(f"/tasks/{task_id}/").content
    saved = page.post(f"/tasks/{task_id}/save-case/", {"name": name})
    assert saved.status_code == 302, saved.content
    return client.get(f"/api/v1/cases/{Case.objects.get(name=name).id}").json()


def assert_green(report: dict[str, Any], *, steps: int) -> None:
    """A replay that passed, every one of its `steps` the same as recorded."""
    assert report["passed"], report["failures"]
    assert report["divergence"] is None and report["first_divergent_step"] is None
    assert len(report["steps"]) == steps and all(s["same"] for s in report["steps"])


def assert_red_at_the_lookup(report: dict[str, Any], operator) -> None:
    """The pricing agents' replay (SDK and graph cases) after the price went from 42 to 43:
    red at step 1, its lookup's two answers and their diff in the report and on the page."""
    assert not report["passed"]
    assert report["first_divergent_step"] == 1
    divergence = report["divergence"]
    assert divergence["tool"] == "lookup" and divergence["args"] == {"item": "widget"}
    assert "answer changed" in divergence["reason"], divergence
    assert divergence["answer"]["recorded"] == "42" and divergence["answer"]["now"] == "43"
    assert '-  "answer": "42"' in divergence["answer"]["diff"]
    assert '+  "answer": "43"' in divergence["answer"]["diff"]
    assert any("diverged at step 1" in f for f in report["failures"])
    page = page_client(operator).get(f"/cases/runs/{report['run']['id']}/")
    assert page.status_code == 200
    assert b'data-testid="replay-answer-diff"' in page.content


def replay(client, case_id: str, **body: Any) -> dict[str, Any]:
    started = client.post(f"/api/v1/cases/{case_id}/replay", body)
    assert started.status_code == 201, started.content
    run = started.json()

    def finished() -> dict[str, Any] | None:
        report = client.get(run["report_url"]).json()
        return report if report["run"]["status"] in TERMINAL else None

    return wait_for(finished, 120, interval=0.2, message="the replay to finish")


def test_a_saved_twenty_step_task_replays_green_against_unchanged_code(recorded):
    report = replay(recorded["client"], recorded["case"]["id"])
    assert report["passed"], report["failures"]
    assert report["first_divergent_step"] is None and report["divergence"] is None
    assert len(report["steps"]) == 20 and all(s["same"] for s in report["steps"])
    assert report["files"] == []
    # The two external side effects ran once, in the recorded run: the replay answered them.
    assert [r["key"] for r in ledger_records()] == ["rec-a", "rec-b"]
    replayed = Task.objects.get(id=report["run"]["task_id"])
    assert replayed.is_replay and replayed.result == "19 steps done"
    assert (replayed.workspace_path / "notes" / "04.md").read_text() == "four\nagain\n"
    assert not (replayed.workspace_path / "notes" / "15.md").exists()


def test_a_changed_policy_fails_the_replay_at_the_step_it_now_denies(recorded, harness_yaml):
    denying = OPEN_POLICY.replace(
        "[]",
        '\n  - {name: no-seven, tool: write_file, path_glob: "notes/07.md", action: deny}',
    )
    restart_workers(recorded["pool"], HARNESS_CONFIG=str(harness_yaml(denying)))
    report = replay(recorded["client"], recorded["case"]["id"])
    assert not report["passed"]
    assert report["first_divergent_step"] == 7
    divergence = report["divergence"]
    assert divergence["tool"] == "write_file" and "denied" in divergence["reason"]
    assert divergence["recorded"]["status"] == "succeeded"
    assert report["steps"][6]["same"] is False and all(s["same"] for s in report["steps"][:6])
    assert [r["key"] for r in ledger_records()] == ["rec-a", "rec-b"]


def test_a_changed_tool_schema_fails_the_replay_at_the_step_that_calls_it(recorded):
    restart_workers(recorded["pool"], STAMP_SCHEMA="v2")
    report = replay(recorded["client"], recorded["case"]["id"])
    assert not report["passed"]
    assert report["first_divergent_step"] == 12
    divergence = report["divergence"]
    assert divergence["tool"] == "stamp" and "invalid_arguments" in divergence["reason"]
    assert any("diverged at step 12" in f for f in report["failures"])


def test_a_candidate_model_on_another_path_is_reported_at_its_first_divergent_call(recorded):
    script = twenty_steps()
    script[9] = {"call": "ledger_append", "args": {"key": "candidate", "value": "x"}}
    candidate = {"kind": "scripted", "script": script}
    report = replay(recorded["client"], recorded["case"]["id"], model=candidate)
    assert not report["passed"]
    assert report["first_divergent_step"] == 10
    assert report["divergence"]["tool"] == "ledger_append"
    assert report["divergence"]["args"] == {"key": "candidate", "value": "x"}
    assert report["divergence"]["ran"] == "no"
    assert all(s["same"] for s in report["steps"][:9])
    # No side effect: the candidate's call never ran, the recorded ones did not run again.
    assert ledger_records(key="candidate") == []
    assert [r["key"] for r in ledger_records()] == ["rec-a", "rec-b"]
