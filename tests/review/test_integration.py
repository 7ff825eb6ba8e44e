"""End to end with real `rqworker` processes, PostgreSQL and Redis: the pause ends the job,
the decision enqueues the resume, and the approved call runs exactly once."""

from __future__ import annotations

import functools
import threading
from datetime import timedelta

import django_rq
import pytest
from rq.job import Job

from agent.tools.testing import ledger_records
from checkpoints.services import checkpoint_decode
from review.models import ReviewRequest
from review.services import reviews_expire_overdue
from tasks.models import Task, ToolCall
from tests.conftest import ApiClient, delete_script, run_in_threads, wait_for
from tests.factories import scripted_task

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def status_of(task: Task) -> str:
    return Task.objects.values_list("status", flat=True).get(pk=task.pk)


def wait_status(task: Task, *statuses: str, timeout: float = 90.0) -> str:
    return wait_for(
        lambda: status_of(task) if status_of(task) in statuses else None,
        timeout,
        message=f"task {task.pk} to become {'/'.join(statuses)}",
    )


def pending_review(task: Task) -> ReviewRequest:
    wait_status(task, "waiting_review")
    return ReviewRequest.objects.get(task=task, status="pending")


def last_tool_message(task: Task) -> str:
    task.refresh_from_db()
    state = checkpoint_decode(task.head_checkpoint).state
    return [m.content for m in state.messages if m.role == "tool"][-1]


def test_delete_file_pauses_and_the_job_ends_then_approval_deletes(workers, api_client, operator):
    task = scripted_task(
        delete_script(), ["delete_file"], enqueue=True, workspace={"files": {"old.log": "stale\n"}}
    )
    review = pending_review(task)
    task.refresh_from_db()
    job = Job.fetch(task.rq_job_id, connection=django_rq.get_connection("default"))
    wait_for(lambda: job.get_status(refresh=True) == "finished", 90, message="the job to end")
    assert job.return_value() == "paused"
    assert (task.workspace_path / "old.log").exists()

    response = api_client(operator).decide(review.id, decision="approve", comment="go")
    assert response.status_code == 200
    assert wait_status(task, "succeeded", "failed") == "succeeded"
    assert not (task.workspace_path / "old.log").exists()
    assert ToolCall.objects.get(pk=review.tool_call_id).attempts == 1


def test_rejection_reason_reaches_the_next_model_turn(workers, api_client, operator):
    task = scripted_task(
        delete_script(), ["delete_file"], enqueue=True, workspace={"files": {"old.log": "stale\n"}}
    )
    review = pending_review(task)
    response = api_client(operator).decide(
        review.id, decision="reject", reason="needed for the audit", comment="leave logs alone"
    )
    assert response.status_code == 200
    assert wait_status(task, "succeeded", "failed") == "succeeded"
    assert (task.workspace_path / "old.log").read_text() == "stale\n"
    seen = last_tool_message(task)
    assert "needed for the audit" in seen and "leave logs alone" in seen


def test_edit_then_approve_writes_the_edited_content(workers, api_client, operator):
    task = scripted_task(
        [
            {"call": "write_file", "args": {"path": "svc.conf", "content": "workers=64\n"}},
            {"final": "tuned"},
        ],
        ["write_file"],
        enqueue=True,
        workspace={"files": {"svc.conf": "workers=4\n"}},
    )
    review = pending_review(task)
    response = api_client(operator).decide(
        review.id,
        decision="approve",
        arguments={"path": "svc.conf", "content": "workers=8\n"},
        comment="64 is too many",
    )
    assert response.status_code == 200
    assert wait_status(task, "succeeded", "failed") == "succeeded"
    assert (task.workspace_path / "svc.conf").read_text() == "workers=8\n"


def test_twenty_concurrent_decisions_one_wins_and_the_tool_runs_once(workers, api_client, operator):
    task = scripted_task(
        [{"call": "ledger_append", "args": {"key": "race", "value": "v"}}, {"final": "recorded"}],
        ["ledger_append"],
        enqueue=True,
    )
    review = pending_review(task)
    clients = [api_client(operator) for _ in range(20)]
    barrier = threading.Barrier(20)
    codes: list[int] = []

    def one(client: ApiClient) -> None:
        barrier.wait()
        codes.append(client.decide(review.id, decision="approve").status_code)

    run_in_threads(*(functools.partial(one, client) for client in clients))
    assert sorted(codes) == [200] + [409] * 19
    assert wait_status(task, "succeeded", "failed") == "succeeded"
    records = [r for r in ledger_records(key="race") if r["task_id"] == str(task.id)]
    assert len(records) == 1
    assert task.events.filter(type="review_decided").count() == 1


def test_expired_review_resumes_the_task_with_expiry_feedback(workers):
    task = scripted_task(
        delete_script(), ["delete_file"], enqueue=True, workspace={"files": {"old.log": "stale\n"}}
    )
    review = pending_review(task)
    assert reviews_expire_overdue(now=review.expires_at + timedelta(seconds=1)) == 1
    assert wait_status(task, "succeeded", "failed") == "succeeded"
    assert ReviewRequest.objects.get(pk=review.pk).status == "expired"
    assert "expired" in last_tool_message(task)
    assert (task.workspace_path / "old.log").exists()
