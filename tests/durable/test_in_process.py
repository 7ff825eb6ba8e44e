"""Durable-execution rules that need no worker process: the loop run in this process on the real
database (crashes are staged by writing what a dead worker leaves behind)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from agent.runtime import task_run
from agent.tools.testing import ledger_path, ledger_records
from review.models import ReviewRequest
from tasks.canonical import canonical_hash
from tasks.models import Task, ToolCall
from tasks.services import CapacityFull, task_acquire, task_transition
from tests.conftest import ApiClient
from tests.factories import enqueued_task, queued_task

pytestmark = pytest.mark.django_db(transaction=True)

LEDGER_ARGS = {"key": "invoice-7", "value": "paid"}


def rewind_to_intent(task: Task, *, effect: bool) -> None:
    """Put the task back where a worker that died during `ledger_append` left it: the intent
    recorded (ledger row running, the `before_external_call` checkpoint as head), nothing
    after it; with `effect`, the side effect had happened."""
    intent = task.checkpoints.get(trigger="before_external_call")
    task.checkpoints.filter(seq__gt=intent.seq).delete()
    task.events.filter(type__in=["tool_finished", "step_finished", "task_finished"]).delete()
    ToolCall.objects.filter(task=task).update(
        status="running", result=None, finished_at=None, attempt_log=[]
    )
    Task.objects.filter(id=task.id).update(
        status="queued", head_checkpoint=intent, finished_at=None, result=""
    )
    if not effect:
        ledger_path().unlink()


def crashed_mid_call(*, effect: bool = False) -> Task:
    """Run the task, then rewind it to a worker's death mid-call and run it again: the next
    run escalates the call to a human."""
    task = queued_task(
        [{"call": "ledger_append", "args": LEDGER_ARGS}, {"final": "done"}], ["ledger_append"]
    )
    assert task_run(task_id=task.id) == "succeeded"
    rewind_to_intent(task, effect=effect)
    assert task_run(task_id=task.id) == "paused"
    return Task.objects.get(id=task.id)


def test_a_non_idempotent_call_with_an_unknown_outcome_goes_to_a_human(queue):
    task = crashed_mid_call()
    assert task.status == "waiting_review"
    call = ToolCall.objects.get(task=task)
    assert call.status == "unknown_outcome" and call.error_class == "unknown_outcome"
    assert call.attempt_log[-1]["status"] == "unknown_outcome"
    review = ReviewRequest.objects.get(task=task)
    assert review.kind == "unknown_outcome" and review.status == "pending"
    assert "whether it took effect is unknown" in review.preview
    assert ledger_records() == []  # never re-run blindly


def decide(user, review, body):
    return ApiClient(user).post(f"/api/v1/reviews/{review.id}/decision", body)


def test_mark_done_records_the_operators_result_and_the_task_goes_on(queue, operator):
    task = crashed_mid_call(effect=True)
    review = ReviewRequest.objects.get(task=task)
    response = decide(
        operator,
        review,
        {
            "decision": "mark_done",
            "comment": "paid in the ERP",
            "result": {"recorded": True, "by": "erp"},
        },
    )
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "approved"
    assert Task.objects.get(id=task.id).status == "queued"
    assert task_run(task_id=task.id) == "succeeded"
    call = ToolCall.objects.get(task=task)
    assert call.status == "succeeded" and call.result == {"recorded": True, "by": "erp"}
    assert len(ledger_records()) == 1  # the effect of the lost run, not repeated
    assert task.events.filter(type="tool_replayed", payload__call_id="0.0.0").exists()


def test_rerun_runs_the_call_again_under_the_same_idempotency_key(queue, operator):
    task = crashed_mid_call()
    review = ReviewRequest.objects.get(task=task)
    rerun = {"decision": "rerun", "arguments_hash": canonical_hash(review.arguments)}
    assert decide(operator, review, rerun).status_code == 200
    assert task_run(task_id=task.id) == "succeeded"
    (record,) = ledger_records()
    assert record["idempotency_key"] == f"{task.id}:0.0.0"
    assert ToolCall.objects.get(task=task).attempts == 2


def test_fail_task_fails_it_with_unknown_outcome(queue, operator):
    task = crashed_mid_call()
    review = ReviewRequest.objects.get(task=task)
    assert decide(operator, review, {"decision": "fail_task"}).status_code == 200
    task.refresh_from_db()
    assert task.status == "failed" and task.error_class == "unknown_outcome"
    assert task.audit_entries.filter(action="review_fail_task").exists()


def test_unknown_outcome_decisions_are_checked(queue, operator, viewer):
    task = crashed_mid_call()
    review = ReviewRequest.objects.get(task=task)
    assert decide(viewer, review, {"decision": "rerun"}).status_code == 403
    response = decide(
        operator,
        review,
        {"decision": "approve", "arguments_hash": canonical_hash(review.arguments)},
    )
    assert response.status_code == 422 and "mark_done" in response.json()["detail"]
    assert decide(operator, review, {"decision": "mark_done"}).status_code == 200
    rerun = {"decision": "rerun", "arguments_hash": canonical_hash(review.arguments)}
    assert decide(operator, review, rerun).status_code == 409


def test_reusing_a_call_id_with_other_arguments_fails_the_task(queue):
    task = queued_task(
        [{"call": "ledger_append", "args": LEDGER_ARGS}, {"final": "done"}], ["ledger_append"]
    )
    assert task_run(task_id=task.id) == "succeeded"
    rewind_to_intent(task, effect=False)
    ToolCall.objects.filter(task=task).update(arguments={"key": "another"})
    assert task_run(task_id=task.id) == "failed"
    task.refresh_from_db()
    assert task.error_class == "idempotency_conflict"
    assert ledger_records() == []


def test_session_clock_leaves_out_time_spent_waiting_for_a_human(queue):
    budget = {"tool_timeout_s": 5, "turn_timeout_s": 10, "session_timeout_s": 60}
    waited = queued_task([{"final": "done"}], [], budget=budget)
    rushed = queued_task([{"final": "done"}], [], budget=budget)
    started = timezone.now() - timedelta(seconds=100)
    Task.objects.filter(id=waited.id).update(started_at=started, review_wait_s=50)
    Task.objects.filter(id=rushed.id).update(started_at=started)

    assert task_run(task_id=waited.id) == "succeeded"
    assert task_run(task_id=rushed.id) == "failed"
    rushed.refresh_from_db()
    assert rushed.error_class == "timeout" and "(layer: session)" in rushed.error_message
    assert rushed.events.get(type="timeout").payload["layer"] == "session"


def test_time_spent_held_or_stopped_before_an_operator_resumes_is_waiting_time(queue):
    task = queued_task([{"final": "x"}], [])
    task_acquire(task_id=task.id, worker_id="w:1")
    task_transition(task_id=task.id, to="failed", fields={"error_class": "model_error"})
    task.events.filter(type="status").update(created_at=timezone.now() - timedelta(hours=1))
    task = task_transition(task_id=task.id, to="queued", reason="operator retry")
    # Waiting time, but not for a review: held and review time are kept apart.
    assert 3590 < task.held_wait_s < 3700 and task.review_wait_s == 0
    assert task.human_wait_s == task.held_wait_s
    task.refresh_from_db()
    assert 3590 < task.held_wait_s < 3700 and task.review_wait_s == 0


def test_a_held_task_resumed_has_held_time_and_no_review_time(queue):
    task = queued_task([{"final": "x"}], [])
    task_transition(task_id=task.id, to="held", reason="operator hold")
    task.events.filter(type="status").update(created_at=timezone.now() - timedelta(seconds=300))
    task = task_transition(task_id=task.id, to="queued", reason="resume")
    task.refresh_from_db()
    assert task.review_wait_s == 0
    assert 295 < task.held_wait_s < 400


def test_a_review_rolled_back_to_a_hold_keeps_its_review_time_apart(queue):
    task = queued_task([{"final": "x"}], [])
    task_acquire(task_id=task.id, worker_id="w:1")
    task_transition(task_id=task.id, to="waiting_review", reason="review")
    task.events.filter(type="status").update(created_at=timezone.now() - timedelta(hours=4))
    task_transition(task_id=task.id, to="held", reason="rollback, resume=false")
    task.events.filter(type="status", payload__to="held").update(
        created_at=timezone.now() - timedelta(seconds=200)
    )
    task = task_transition(task_id=task.id, to="queued", reason="resume")
    assert 4 * 3600 - 10 < task.review_wait_s < 4 * 3600 + 100
    assert 195 < task.held_wait_s < 300


@pytest.fixture
def one_at_a_time(harness_yaml):
    harness_yaml("max_concurrent_tasks: 1\nreview_rules: []\n")


def test_a_task_finding_no_free_capacity_stays_queued_and_is_put_back_on_its_queue(
    queue, one_at_a_time
):
    first = queued_task([{"final": "x"}], [])
    second = queued_task([{"final": "x"}], [])
    assert task_acquire(task_id=first.id, worker_id="w:1") is not None
    with pytest.raises(CapacityFull):
        task_acquire(task_id=second.id, worker_id="w:2")
    assert task_run(task_id=second.id) == "deferred"
    second.refresh_from_db()
    assert second.status == "queued" and second.lease_epoch == 0
    # Put back through the scheduler, a few seconds out, rather than a worker waiting.
    assert second.rq_job_id in queue.scheduled_job_registry.get_job_ids()


@pytest.mark.parametrize("priority", ["high", "default", "low"])
def test_a_tasks_priority_picks_its_queue(durable_settings, priority):
    import django_rq

    queue = django_rq.get_queue(priority)
    queue.empty()
    task = enqueued_task([{"final": "x"}], [], priority=priority)
    task.refresh_from_db()
    assert queue.job_ids == [task.rq_job_id]
    queue.empty()
