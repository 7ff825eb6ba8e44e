"""Issue #47 item 3 with real workers: a LangGraph task saved as a case replays green with its
nodes' recorded model decisions (the graph's chat model is not asked) and the recorded answer of
its tool without a declared risk (which does not run again); when its read tool's answer
changes, the replay turns red at that step, the two answers and their diff shown. A graph task
whose run stopped at a person's review is refused with a 4xx naming why; one whose reviews were
answered replays them with the recorded answers, asking no one."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent.replay_suite import replay_one
from cases.models import Case
from review.models import ReviewRequest
from tasks.models import Task, TaskEvent
from tests.cases.graph_case_graphs import runs
from tests.cases.test_replay_workers import (
    assert_green,
    assert_red_at_the_lookup,
    replay,
    restart_workers,
    saved_from_page,
)
from tests.conftest import ApiClient, page_client
from tests.factories import ReviewRequestFactory, ToolCallFactory, spec_task

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

CONFIG = (
    "langgraph_graphs:\n"
    '  pricing: "tests.cases.graph_case_graphs:pricing"\n'
    '  own_tools: "tests.cases.graph_case_graphs:pricing_own_tools"\n'
    '  reviewed: "tests.cases.graph_case_graphs:pricing_reviewed"\n'
    '  breakpoints: "tests.cases.graph_case_graphs:pricing_breakpoints"\n'
)
RECORDED_RUNS = ["model0", "lookup", "model1", "notify", "model2"]


def pricing_spec(marker_dir, graph: str = "pricing") -> dict[str, Any]:
    question = json.dumps({"marker_dir": str(marker_dir)})
    return {
        "title": "widget price",
        "goal": "find the widget's price",
        "agent": {
            "kind": "langgraph",
            "graph": graph,
            "input": {"messages": [{"role": "user", "content": question}]},
        },
    }


@pytest.fixture
def graph_case(harness_dirs, harness_yaml, worker_pool, task_api, api_client, operator, tmp_path):
    """A worker; the pricing graph's task run by it and saved as a case."""
    worker_pool.env["HARNESS_CONFIG"] = str(harness_yaml(CONFIG))
    worker_pool.start(1)
    marker_dir = tmp_path / "markers"
    marker_dir.mkdir()
    done = task_api.run(pricing_spec(marker_dir), timeout=120)
    assert done["status"] == "succeeded", done
    assert done["result"] == "the widget costs 42 (sent)"
    assert runs(marker_dir) == RECORDED_RUNS
    client = api_client(operator)
    # Saved from the task page's button, as for the harness's own tasks.
    case = saved_from_page(operator, client, done["id"], "graph pricing")
    assert case["steps"] == 3 and case["calls"] == 2
    return {"case": case, "client": client, "pool": worker_pool, "markers": marker_dir}


def test_a_graph_case_replays_green_from_its_recorded_decisions(graph_case, operator):
    report = replay(graph_case["client"], graph_case["case"]["id"])
    assert_green(report, steps=3)
    # The model was not asked again; the read tool ran in the replay, the other was answered
    # from the recording.
    assert runs(graph_case["markers"]) == [*RECORDED_RUNS, "lookup"]
    replayed = Task.objects.get(id=report["run"]["task_id"])
    assert replayed.is_replay and replayed.result == "the widget costs 42 (sent)"

    # `harness replay` (the suite, in this process) replays it the same way.
    row = replay_one(
        case=Case.objects.get(id=graph_case["case"]["id"]),
        model=None,
        on_divergence="stop",
        user=operator,
    )
    assert row.passed, row.report["failures"]
    assert runs(graph_case["markers"]) == [*RECORDED_RUNS, "lookup", "lookup"]


def test_a_changed_tool_answer_turns_the_graph_case_red_with_the_diff(graph_case, operator):
    restart_workers(graph_case["pool"], GRAPH_CASE_PRICE="43")
    report = replay(graph_case["client"], graph_case["case"]["id"])
    assert_red_at_the_lookup(report, operator)
    # Stopped there: the model was not asked for its next turn, nothing was notified.
    assert runs(graph_case["markers"]) == [*RECORDED_RUNS, "lookup"]


def test_a_graph_that_runs_its_tools_outside_a_tool_node_is_not_replayed(graph_case, task_api):
    # The same agent, its tools run by a node of its own: a replay could not answer them.
    marker_dir = graph_case["markers"].parent / "own"
    marker_dir.mkdir()
    done = task_api.run(pricing_spec(marker_dir, graph="own_tools"), timeout=120)
    assert done["status"] == "succeeded" and runs(marker_dir) == RECORDED_RUNS
    saved = graph_case["client"].post(f"/api/v1/tasks/{done['id']}/save-case", {"name": "own"})
    assert saved.status_code == 201, saved.content
    report = replay(graph_case["client"], saved.json()["id"])
    assert not report["passed"]
    assert "run_tools ran tools outside a ToolNode" in report["divergence"]["reason"]
    # Stopped before the graph ran: neither its model nor its tools ran again.
    assert runs(marker_dir) == RECORDED_RUNS


def test_a_graph_case_replays_its_review_with_the_recorded_answer(graph_case, task_api, operator):
    # The notify call waits for a person, who edits its message before it runs.
    marker_dir = graph_case["markers"].parent / "reviewed"
    marker_dir.mkdir()
    task = task_api.create(pricing_spec(marker_dir, graph="reviewed"))
    task_api.wait(task["id"], "waiting_review", timeout=120)
    review = ReviewRequest.objects.get(task_id=task["id"])
    assert review.tool == "notify" and review.original_arguments == {"message": "price 42"}
    edited = {"message": "price 42, checked"}
    decided = graph_case["client"].decide(review.id, decision="approve", arguments=edited)
    assert decided.status_code == 200, decided.content
    done = task_api.wait(task["id"], "succeeded", timeout=120)
    assert runs(marker_dir) == RECORDED_RUNS
    case = saved_from_page(operator, graph_case["client"], done["id"], "reviewed pricing")

    # No one is asked again: the graph is resumed with the recorded (edited) answer.
    report = replay(graph_case["client"], case["id"])
    assert report["passed"], report["failures"]
    assert all(s["same"] for s in report["steps"])
    # The graph was resumed with the operator's edit, as recorded.
    resumed = TaskEvent.objects.get(task_id=report["run"]["task_id"], type="graph_resumed")
    assert resumed.payload["replayed"] is True
    edit = {"type": "edit", "edited_action": {"name": "notify", "args": edited}}
    assert resumed.payload["answers"] == [{"decisions": [edit]}]
    replayed = Task.objects.get(id=report["run"]["task_id"])
    assert replayed.result == done["result"]
    assert not ReviewRequest.objects.filter(task=replayed).exists()
    assert runs(marker_dir) == [*RECORDED_RUNS, "lookup"]


def test_a_graph_case_goes_past_its_breakpoints_with_the_recorded_decisions(
    graph_case, task_api, operator
):
    # A stop before each tools step: lookup approved, notify edited.
    marker_dir = graph_case["markers"].parent / "breakpoints"
    marker_dir.mkdir()
    task = task_api.create(pricing_spec(marker_dir, graph="breakpoints"))
    edited = {"message": "price 42, checked"}
    for tool, arguments in (("lookup", None), ("notify", edited)):
        task_api.wait(task["id"], "waiting_review", timeout=120)
        review = ReviewRequest.objects.get(task_id=task["id"], status="pending")
        assert review.tool == tool
        body = {"decision": "approve", **({"arguments": arguments} if arguments else {})}
        decided = graph_case["client"].decide(review.id, **body)
        assert decided.status_code == 200, decided.content
    done = task_api.wait(task["id"], "succeeded", timeout=120)
    assert done["result"] == "the widget costs 42 (sent)"
    case = saved_from_page(operator, graph_case["client"], done["id"], "breakpoints")

    report = replay(graph_case["client"], case["id"])
    assert report["passed"], report["failures"]
    # The edited call ran as edited, in the recording and in the replay.
    assert report["steps"][1]["recorded"]["calls"][0]["args"] == edited
    assert report["steps"][1]["replay"]["calls"][0]["args"] == edited
    replayed = report["run"]["task_id"]
    assert not ReviewRequest.objects.filter(task_id=replayed).exists()
    resumed = TaskEvent.objects.filter(task_id=replayed, type="graph_resumed").order_by("id")
    assert [e.payload["approved"] for e in resumed] == [["c1"], ["c2"]]  # the tool call ids
    assert [e.payload["edits"] for e in resumed] == [{}, {"c2": edited}]
    assert runs(marker_dir) == [*RECORDED_RUNS, "lookup"]


def test_a_graph_task_whose_run_ended_at_a_review_is_refused_naming_why(operator):
    spec = {"title": "t", "goal": "g", "agent": {"kind": "langgraph", "graph": "release_bot"}}
    task = spec_task(spec, enqueue=False)
    # Asked at a checkpoint and never answered: the task was stopped while it waited.
    ReviewRequestFactory(
        tool_call=ToolCallFactory(task=task, status="rejected"),
        kind="langgraph",
        interrupt={"checkpoint_id": "1f0-a", "mode": "batched"},
    )
    Task.objects.filter(id=task.id).update(status="failed")
    response = ApiClient(operator).post(f"/api/v1/tasks/{task.id}/save-case", {"name": "x"})
    assert response.status_code == 409, response.content
    assert "ended at a review" in response.json()["detail"]
    assert not Case.objects.exists()
    # The task page says so instead of offering a form that would be refused.
    page = page_client(operator).get(f"/tasks/{task.id}/").content.decode()
    assert 'data-testid="save-case-unavailable"' in page and "ended at a review" in page
    assert 'data-testid="save-case-button"' not in page
