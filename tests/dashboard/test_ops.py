"""/ops/: queue depth and oldest job, workers, failed jobs and their requeue (real Redis)."""

from __future__ import annotations

import django_rq
import pytest
from rq import Queue, SimpleWorker, Worker

from tasks.models import AuditEntry, Task
from tests.factories import TaskFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def redis():
    connection = django_rq.get_connection("default")
    connection.flushdb()
    yield connection
    connection.flushdb()


@pytest.fixture
def failed_job(redis):
    """A job whose first argument is a task id and which fails when a worker runs it, its task
    still queued (the job failed before taking it)."""
    task = TaskFactory(status="queued")
    queue = Queue("default", connection=redis)
    job = queue.enqueue("uuid.UUID", str(task.id), 5, description="broken job")
    SimpleWorker([queue], connection=redis).work(burst=True)
    assert job.id in queue.failed_job_registry.get_job_ids()
    return job, task


def test_queues_show_depth_and_oldest_job(as_user, viewer, redis):
    queue = Queue("low", connection=redis)
    queue.enqueue("operator.add", 1, 2)
    queue.enqueue("operator.add", 3, 4)
    response = as_user(viewer).get("/ops/")
    low = next(q for q in response.context["queues"] if q.name == "low")
    assert low.depth == 2 and low.oldest_enqueued_at is not None
    assert 'data-testid="depth-low">2<' in response.content.decode()


def test_registered_workers_are_listed_with_their_state(as_user, viewer, redis):
    worker = Worker([django_rq.get_queue("default")], connection=redis, name="w-test")
    worker.register_birth()
    try:
        workers = as_user(viewer).get("/ops/").context["workers"]
        assert [(w.name, w.queues) for w in workers] == [("w-test", ["default"])]
    finally:
        worker.register_death()


def test_failed_jobs_show_their_error_and_task(as_user, viewer, failed_job):
    job, task = failed_job
    response = as_user(viewer).get("/ops/")
    [shown] = response.context["failed_jobs"]
    assert (shown.id, shown.task_id) == (job.id, str(task.id))
    assert "TypeError" in shown.error
    assert f'data-testid="requeue-{job.id}"' not in response.content.decode()


def test_operator_requeues_a_failed_job_and_it_is_audited(as_user, operator, failed_job):
    job, task = failed_job
    client = as_user(operator)
    assert f'data-testid="requeue-{job.id}"' in client.get("/ops/").content.decode()
    response = client.post(f"/ops/jobs/default/{job.id}/requeue/")
    assert response.status_code == 302
    queue = django_rq.get_queue("default")
    assert job.id in queue.get_job_ids()
    assert job.id not in queue.failed_job_registry.get_job_ids()
    entry = AuditEntry.objects.get(action="requeue")
    assert (entry.actor_name, entry.task_id) == ("operator", task.id)


def test_requeue_of_an_unknown_job_changes_nothing(as_user, operator, redis):
    response = as_user(operator).post("/ops/jobs/default/missing/requeue/", follow=True)
    assert "not in the failed-job registry" in response.content.decode()
    assert not AuditEntry.objects.exists()


def test_requeue_is_refused_for_a_task_waiting_for_a_decision(
    as_user, api_client, operator, failed_job
):
    job, task = failed_job
    Task.objects.filter(id=task.id).update(status="waiting_review")
    client = as_user(operator)
    page = client.get("/ops/").content.decode()
    assert f'data-testid="requeue-{job.id}"' not in page
    assert "Not requeueable: its task is waiting for a decision" in page

    response = api_client(operator).post(f"/api/v1/ops/jobs/default/{job.id}/requeue")
    assert response.status_code == 409
    assert "waiting for a decision" in response.json()["detail"]
    shown = client.post(f"/ops/jobs/default/{job.id}/requeue/", follow=True).content.decode()
    assert "not requeued: its task is waiting for a decision" in shown
    assert job.id in django_rq.get_queue("default").failed_job_registry.get_job_ids()
    assert not AuditEntry.objects.exists()


def test_requeue_is_refused_once_the_task_was_redispatched(api_client, operator, failed_job):
    job, task = failed_job
    Task.objects.filter(id=task.id).update(rq_job_id="a-later-job")
    response = api_client(operator).post(f"/api/v1/ops/jobs/default/{job.id}/requeue")
    assert response.status_code == 409
    assert "redispatched: job a-later-job runs it" in response.json()["detail"]


def test_requeue_through_the_api(api_client, operator, viewer, failed_job):
    job, task = failed_job
    path = f"/api/v1/ops/jobs/default/{job.id}/requeue"
    assert api_client(viewer).post(path).status_code == 403
    assert api_client(operator).post("/api/v1/ops/jobs/default/missing/requeue").status_code == 404
    response = api_client(operator).post(path)
    assert response.status_code == 200
    assert job.id in django_rq.get_queue("default").get_job_ids()
    assert AuditEntry.objects.get(action="requeue").task_id == task.id


def test_viewer_cannot_requeue(as_user, viewer, failed_job):
    job, _ = failed_job
    assert as_user(viewer).post(f"/ops/jobs/default/{job.id}/requeue/").status_code == 403
    assert job.id in django_rq.get_queue("default").failed_job_registry.get_job_ids()


def test_the_sweeps_last_run_is_shown(as_user, viewer, redis):
    from agent.sweep import sweep_once

    client = as_user(viewer)
    assert "The sweep has not run yet" in client.get("/ops/").content.decode()
    sweep_once()
    response = client.get("/ops/")
    assert response.context["sweep"].runs == 1
    assert "<dt>Runs</dt><dd>1</dd>" in response.content.decode()
