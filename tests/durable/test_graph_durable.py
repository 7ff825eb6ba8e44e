"""LangGraph graphs run by real rqworkers: a worker killed with SIGKILL mid-node, a cancel
mid-graph, and a review decided after the worker that paused the graph has exited. Each
resumes from the graph's latest LangGraph checkpoint: finished super-steps do not run again."""

from __future__ import annotations

import pytest

from checkpoints.recovery import (
    checkpoint_rollback,
    graph_rollback_preview,
    task_cancel,
    task_resume,
)
from checkpoints.selectors import graph_checkpoints
from review.models import ReviewRequest
from tasks.models import ToolCall
from tests.conftest import approve, wait_for
from tests.factories import graph_task

from .conftest import TEST_CONFIG, wait_status
from .graphs import runs, workspace_files

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def harness_config_text() -> str:
    return TEST_CONFIG + (
        "langgraph_graphs:\n"
        '  slow_steps: "tests.durable.graphs:graph"\n'
        '  release_bot: "examples.langgraph_release:graph"\n'
        '  files: "tests.durable.graphs:files_graph"\n'
        '  asks_then_sleeps: "tests.durable.graphs:asks_then_sleeps"\n'
    )


def test_graph_killed_mid_node_is_redispatched_and_resumes_from_its_checkpoint(fleet, tmp_path):
    fleet.worker(2)
    fleet.sweeper()
    task = graph_task("slow_steps", {"marker_dir": str(tmp_path), "sleep_s": 2})
    wait_for(lambda: "slow:start" in runs(tmp_path), message="the slow node to start")
    fleet.kill_worker_of(task.id)

    task = wait_status(task.id, "succeeded")
    assert '"trail": "first,slow,last"' in task.result
    # `first` finished before the kill and is in a checkpoint: it does not run again; the
    # killed `slow` does.
    assert runs(tmp_path) == ["first", "slow:start", "slow:start", "slow:end", "last"]
    assert task.redispatch_count == 1
    assert task.events.filter(type="resumed").count() == 1


def test_graph_canceled_mid_node_stops_at_the_super_step_and_resumes_after_it(
    fleet, tmp_path, operator
):
    fleet.worker(1)
    task = graph_task("slow_steps", {"marker_dir": str(tmp_path), "sleep_s": 1.5})
    wait_for(lambda: "slow:start" in runs(tmp_path), message="the slow node to start")
    task_cancel(task_id=task.id, user=operator, reason="pause it")

    task = wait_status(task.id, "canceled")
    assert runs(tmp_path) == ["first", "slow:start", "slow:end"]
    task_resume(task_id=task.id, user=operator, reason="go on")

    task = wait_status(task.id, "succeeded")
    assert runs(tmp_path) == ["first", "slow:start", "slow:end", "last"]
    assert '"trail": "first,slow,last"' in task.result


def test_review_is_resumed_by_a_new_worker_after_the_pausing_one_exited(fleet, operator):
    fleet.worker(1)
    task = graph_task("release_bot", {"changes": ["breaking: new API"], "current": "1.9.0"})
    wait_status(task.id, "waiting_review")
    fleet.pool.stop()
    assert all(p.poll() is not None for p in fleet.pool.processes)

    review = ReviewRequest.objects.get(task=task)
    assert review.original_arguments["version"] == "2.0.0"
    fleet.worker(1)
    approve(review, operator, comment="ship")

    task = wait_status(task.id, "succeeded")
    assert '"published": "2.0.0"' in task.result


FINAL_FILES = {"notes/a.txt": "revised\n", "c.txt": "c1\n", "out/d.txt": "d1\n"}


def test_rollback_to_an_earlier_super_step_restores_the_workspace_and_resumes_from_there(
    fleet, tmp_path, operator
):
    fleet.worker(1)
    task = graph_task("files", {"marker_dir": str(tmp_path)})
    task = wait_status(task.id, "succeeded")
    workspace = task.workspace_path
    assert workspace_files(workspace) == FINAL_FILES

    listed = graph_checkpoints(task=task)
    after_draft = next(c for c in listed if c["step"] == 1)  # next: revise
    preview = graph_rollback_preview(task=task, checkpoint_id=after_draft["checkpoint_id"])
    assert preview["workspace"]["files_restored"] == ["b.txt", "notes/a.txt"]
    assert preview["workspace"]["files_deleted"] == ["c.txt", "out/d.txt"]
    assert [c["step"] for c in preview["superseded"]] == [3, 2]

    checkpoint_rollback(
        task_id=task.id,
        checkpoint_id=after_draft["checkpoint_id"],
        user=operator,
        reason="redo the revision",
        resume=False,
    )
    # Exactly the files as the draft step left them: later files gone, changed ones back.
    assert workspace_files(workspace) == {"notes/a.txt": "draft\n", "b.txt": "b1\n"}
    assert not (workspace / "out").exists()
    rollback = task.events.get(type="rollback")
    assert rollback.payload["files_restored"] == 2 and rollback.payload["files_deleted"] == 2

    task_resume(task_id=task.id, user=operator, reason="go on")
    task = wait_status(task.id, "succeeded")
    # The graph went on from the draft: revise and finish ran again, draft did not.
    assert runs(tmp_path) == ["draft", "revise", "finish", "revise", "finish"]
    assert workspace_files(workspace) == FINAL_FILES
    assert '"done": ["draft", "revise", "finish"]' in task.result
    listed = graph_checkpoints(task=task)
    assert sorted(c["step"] for c in listed if c["superseded"]) == [2, 3]


def test_a_worker_killed_while_the_graph_runs_an_approved_decision_settles_it_on_redispatch(
    fleet, tmp_path, operator
):
    fleet.worker(2)
    fleet.sweeper()
    task = graph_task("asks_then_sleeps", {"marker_dir": str(tmp_path), "sleep_s": 2})
    wait_status(task.id, "waiting_review")
    review = ReviewRequest.objects.get(task=task)
    approve(review, operator, comment="go")
    wait_for(lambda: "resumed:start" in runs(tmp_path), message="the resumed node to start")
    assert ToolCall.objects.get(task=task).status == "running"
    fleet.kill_worker_of(task.id)

    task = wait_status(task.id, "succeeded")
    assert '"answer": "approve"' in task.result
    assert runs(tmp_path) == ["resumed:start", "resumed:start", "resumed:end"]
    assert task.redispatch_count == 1
    call = ToolCall.objects.get(task=task)
    assert call.status == "succeeded" and call.finished_at is not None
