"""/ops/: queue depth and oldest job, workers, failed jobs and their requeue (real Redis)."""

from __future__ import annotations

import django_rq
import pytest
from rq import Queue, SimpleWorker, Worker

from tasks.models import AuditEntry
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
    """A job whose first argument is a task id and which fails when a worker runs it."""
    task = TaskFactory(status="failed")
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
