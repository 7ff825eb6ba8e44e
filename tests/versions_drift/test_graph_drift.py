"""A deploy under a paused LangGraph task (issue #43, Done when 2, the graph half), with the
real `langgraph` library: the graph stops at a breakpoint before its node `b`; the registered
graph is swapped for one where that node is called `c`; workers restart; the operator approves
the breakpoint. The node does not run (the new graph, left to itself, would silently go
nowhere): a `version_drift` review lists the removed and added node, `continue` is refused
(the node is gone), `cancel` ends the task. Drift that does not touch the next node is an
event and the graph goes on."""

from __future__ import annotations

import pytest

from agent.jobs import run_task
from checkpoints.models import GraphCheckpoint
from review.models import DecisionReceipt, ReviewRequest
from tasks.models import Task, TaskEvent
from tests.conftest import wait_for
from tests.durable.graphs import runs
from tests.factories import graph_spec, spec_task
from tests.versions_drift.conftest import restart
from tests.versions_drift.test_drift_page import logged_in

pytestmark = [pytest.mark.django_db(transaction=True)]

GRAPHS = 'langgraph_graphs:\n  pipeline: "tests.versions_drift.graphs:{graph}"\n'
BASE = """
retry: {initial_s: 0.2, factor: 2, max_s: 5, jitter: full, max_attempts: 4}
timeouts: {session_s: 600, turn_s: 60, tool_s: 30}
"""


@pytest.fixture
def harness_config_text() -> str:
    return BASE + GRAPHS.format(graph="before_b")


def pending(task: Task, kind: str) -> ReviewRequest:
    return wait_for(
        lambda: ReviewRequest.objects.filter(task=task, status="pending", kind=kind).first(),
        90,
        message=f"a pending {kind} review",
    )


@pytest.mark.integration
def test_a_graph_resumed_after_its_next_node_was_renamed_stops_for_a_version_drift_review(
    fleet, harness_yaml, operator, api_client, tmp_path
):
    fleet.worker(1)
    task = spec_task(
        graph_spec("pipeline", {"marker_dir": str(tmp_path)}), user=operator, enqueue=True
    )
    breakpoint_review = pending(task, "langgraph")
    assert breakpoint_review.tool == "b"
    assert runs(tmp_path) == ["first"]

    restart(fleet, lambda: harness_yaml(BASE + GRAPHS.format(graph="renamed_c")))
    api = api_client(operator)
    assert api.decide(breakpoint_review.id, decision="approve").status_code == 200
    review = pending(task, "version_drift")

    assert runs(tmp_path) == ["first"]  # neither b (gone) nor c ran
    body = api.get(f"/api/v1/reviews/{review.id}").json()
    assert body["kind"] == "version_drift"
    drift = body["drift"]
    assert drift["touches_next"] and drift["next"] == ["b"] and drift["nodes_gone"] == ["b"]
    assert drift["touches"] == ["the graph's next node b is gone"]
    (change,) = [c for c in drift["changes"] if c["kind"] == "graph"]
    assert change["removed"] == ["b"] and change["added"] == ["c"]
    assert "b" in change["old_body"]["nodes"] and "c" in change["new_body"]["nodes"]
    event = TaskEvent.objects.filter(task=task, type="version_drift").get()
    assert event.payload["next"] == ["b"] and event.payload["touches_next"] is True

    refused = api.decide(review.id, decision="continue", arguments_hash=body["arguments_hash"])
    assert refused.status_code == 409, refused.content
    assert "next node b is gone" in refused.json()["detail"]
    assert api.decide(review.id, decision="approve").status_code == 422

    assert api.decide(review.id, decision="cancel", comment="b is gone").status_code == 200
    assert wait_for(
        lambda: Task.objects.values_list("status", flat=True).get(pk=task.pk) == "canceled", 60
    )
    assert runs(tmp_path) == ["first"]
    receipt = DecisionReceipt.objects.filter(review_id=review.id).get()
    assert receipt.decision == "cancel"


def test_drift_that_does_not_touch_the_next_node_is_an_event_and_the_graph_goes_on(
    durable_settings, harness_yaml, operator, api_client, tmp_path
):
    task = spec_task(
        graph_spec("pipeline", {"marker_dir": str(tmp_path)}), user=operator, enqueue=True
    )
    assert run_task(task.id) == "paused"
    breakpoint_review = ReviewRequest.objects.get(task=task)
    # The deploy adds an interrupt point elsewhere: b, its edges and points are as they were.
    harness_yaml(BASE + GRAPHS.format(graph="before_b_watched"))
    assert api_client(operator).decide(breakpoint_review.id, decision="approve").status_code == 200

    assert run_task(task.id) == "succeeded"
    assert runs(tmp_path) == ["first", "b"]
    assert not ReviewRequest.objects.filter(task=task, kind="version_drift").exists()
    event = TaskEvent.objects.filter(task=task, type="version_drift").get()
    assert event.payload["touches_next"] is False and event.payload["next"] == ["b"]
    assert event.payload["changes"] == ["graph changed"]


def test_restart_on_a_graph_s_version_drift_review_runs_the_new_graph_from_that_checkpoint(
    durable_settings, harness_yaml, operator, second_operator, api_client, tmp_path
):
    task = spec_task(
        graph_spec("pipeline", {"marker_dir": str(tmp_path)}), user=operator, enqueue=True
    )
    assert run_task(task.id) == "paused"
    harness_yaml(BASE + GRAPHS.format(graph="renamed_c"))
    api = api_client(operator)
    assert (
        api.decide(ReviewRequest.objects.get(task=task).id, decision="approve").status_code == 200
    )
    assert run_task(task.id) == "paused"
    review = ReviewRequest.objects.get(task=task, kind="version_drift", status="pending")
    assert runs(tmp_path) == ["first"]

    page = logged_in(operator).get(f"/reviews/{review.id}/")
    assert page.status_code == 200
    # The page offers the graph's own checkpoints to restart from.
    for row in GraphCheckpoint.objects.filter(task=task, checkpoint_ns=""):
        assert f'value="{row.checkpoint_id}"' in page.content.decode()
    # ...and says migrate does not apply to a graph task, rather than offer it.
    assert 'data-testid="drift-migrate-refused"' in page.content.decode()
    earliest = (
        GraphCheckpoint.objects.filter(task=task, checkpoint_ns="")
        .order_by("checkpoint_id")
        .first()
    )
    migrate = api.decide(review.id, decision="migrate", migration="any")
    assert migrate.status_code == 409 and "LangGraph" in migrate.json()["detail"]
    refused = api.decide(review.id, decision="restart", checkpoint_id="not-a-checkpoint")
    assert refused.status_code == 422 and refused.json()["errors"][0]["field"] == "checkpoint_id"
    restarted = api.decide(review.id, decision="restart", checkpoint_id=earliest.checkpoint_id)
    assert restarted.status_code == 200, restarted.content
    review.refresh_from_db()
    assert review.choice == {"decision": "restart", "checkpoint_id": earliest.checkpoint_id}

    # From the start, under the new graph: first runs again, then it stops before c.
    assert run_task(task.id) == "paused"
    assert runs(tmp_path) == ["first", "first"]
    before_c = ReviewRequest.objects.get(task=task, kind="langgraph", status="pending")
    assert before_c.tool == "c"
    assert api.decide(before_c.id, decision="approve").status_code == 200
    assert run_task(task.id) == "succeeded"
    assert runs(tmp_path) == ["first", "first", "c"]


def test_continue_when_the_next_node_changed_resumes_the_new_graph_once(
    durable_settings, harness_yaml, operator, second_operator, api_client, tmp_path
):
    task = spec_task(
        graph_spec("pipeline", {"marker_dir": str(tmp_path)}), user=operator, enqueue=True
    )
    assert run_task(task.id) == "paused"
    # The deploy keeps b and its breakpoint, but b now goes on to a new node c.
    harness_yaml(BASE + GRAPHS.format(graph="b_then_c"))
    api = api_client(operator)
    breakpoint_review = ReviewRequest.objects.get(task=task)
    assert api.decide(breakpoint_review.id, decision="approve").status_code == 200
    assert run_task(task.id) == "paused"
    review = ReviewRequest.objects.get(task=task, kind="version_drift", status="pending")
    assert runs(tmp_path) == ["first"]
    drift = review.drift
    assert drift["touches"] == ["the graph's next node b changed (its edges or interrupt points)"]
    assert drift["next"] == ["b"] and drift["nodes_gone"] == []
    (change,) = [c for c in drift["changes"] if c["kind"] == "graph"]
    assert change["added"] == ["c"] and change["removed"] == []

    body = api.get(f"/api/v1/reviews/{review.id}").json()
    response = api_client(second_operator).decide(
        review.id, decision="continue", arguments_hash=body["arguments_hash"]
    )
    assert response.status_code == 200, response.content
    # Under the new graph, from the breakpoint: b once, then the new c; not asked again.
    assert run_task(task.id) == "succeeded"
    assert runs(tmp_path) == ["first", "b", "c"]
    assert ReviewRequest.objects.filter(task=task, kind="version_drift").count() == 1
    assert DecisionReceipt.objects.filter(review_id=review.id).get().decision == "continue"
