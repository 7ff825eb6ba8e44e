"""`/metrics`: what the loop, the state machine and reviews record, summed in Redis, and the
gauges a scrape computes from the database and RQ (tests/security/test_metrics_access.py
attacks the access rules; test_metrics_prometheus.py scrapes a running stack with Prometheus)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from harness_site import metrics as recorder
from harness_site.metrics import TOOL_FAILURES, metric_inc, metrics_connection, metrics_flush
from review.models import ReviewRequest
from tasks.models import Task
from tasks.rollups import rollups_advance
from tasks.selectors import task_status_counts
from tasks.services import task_transition
from tests.factories import TaskFactory

TOKEN = "metrics-test-token"
Samples = dict[tuple[str, frozenset], float]


@pytest.fixture(autouse=True)
def metrics_on(settings) -> None:
    settings.HARNESS_METRICS_TOKEN = TOKEN
    settings.HARNESS_METRICS_ALLOW = []
    recorder.metrics_flush()
    redis = metrics_connection()
    keys = redis.keys(recorder.KEY_PREFIX + "*")
    if keys:
        redis.delete(*keys)


def scrape() -> Samples:
    """Flush this process' counts, then scrape /metrics as Prometheus would."""
    metrics_flush()
    response = Client().get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    samples: Samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def test_tool_calls_are_timed_by_tool_and_failures_counted_by_error_class(
    run_task: Callable[..., Task],
):
    task = run_task(
        [
            {"call": "flaky", "args": {"key": "m1", "fail_times": 1, "error": "permanent"}},
            {"call": "flaky", "args": {"key": "m1", "fail_times": 1, "error": "permanent"}},
            {"call": "read_file", "args": {"path": "notes.txt"}},
            {"final": "done"},
        ],
        ["flaky", "read_file"],
        workspace={"files": {"notes.txt": "hello\n"}},
    )
    assert task.status == "succeeded"
    samples = scrape()
    assert value(samples, "harness_tool_call_duration_seconds_count", tool="flaky") == 2
    assert value(samples, "harness_tool_call_duration_seconds_count", tool="read_file") == 1
    assert value(samples, "harness_tool_call_duration_seconds_bucket", tool="flaky", le="+Inf") == 2
    failures = "harness_tool_failures_total"
    assert value(samples, failures, tool="flaky", error_class="permanent") == 1
    assert value(samples, failures, tool="read_file", error_class="permanent") is None
    # One step per model turn that called tools; the final answer's turn ends no step.
    assert value(samples, "harness_step_duration_seconds_count") == 3
    assert value(samples, "harness_checkpoint_write_seconds_count") >= 3
    assert value(samples, "harness_metrics_source_up", source="redis") == 1


def test_counts_add_up_across_processes_in_redis(run_task: Callable[..., Task]):
    metric_inc(TOOL_FAILURES, tool="flaky", error_class="transient")
    metrics_flush()
    # Another process (here: another host's worker) adding to the same series.
    redis = metrics_connection()
    redis.hincrby(TOOL_FAILURES.key, '["flaky","transient"]', 2)
    samples = scrape()
    assert value(samples, "harness_tool_failures_total", tool="flaky", error_class="transient") == 3


def test_tasks_by_status_count_finished_tasks_from_the_rollups_and_the_rest(operator):
    long_ago = timezone.now() - timedelta(hours=5)
    for status in ("succeeded", "succeeded", "failed"):
        TaskFactory(status=status, finished_at=long_ago, created_by=operator)
    assert rollups_advance(now=timezone.now()) > 0  # those hours are rolled now
    TaskFactory(status="succeeded", finished_at=timezone.now(), created_by=operator)
    TaskFactory(status="pending", created_by=operator)
    TaskFactory(status="running", created_by=operator, heartbeat_at=timezone.now())
    waiting = TaskFactory(status="running", created_by=operator, heartbeat_at=long_ago)
    task_transition(task_id=waiting.id, to="waiting_review")

    counts = task_status_counts()
    assert counts["succeeded"] == 3 and counts["failed"] == 1
    assert counts["pending"] == 1 and counts["running"] == 1 and counts["waiting_review"] == 1
    assert counts["canceled"] == 0
    samples = scrape()
    assert value(samples, "harness_tasks", status="succeeded") == 3
    assert value(samples, "harness_tasks", status="stalled") == 0
    assert value(samples, "harness_tasks_heartbeat_stale") == 0


def test_a_running_task_without_heartbeat_is_reported_stale(operator, settings):
    settings.HARNESS_STALE_AFTER_S = 60
    TaskFactory(
        status="running",
        created_by=operator,
        heartbeat_at=timezone.now() - timedelta(minutes=5),
    )
    assert value(scrape(), "harness_tasks_heartbeat_stale") == 1


def test_pending_reviews_by_rule_and_the_oldest_ones_age(paused_review):
    review = paused_review()
    ReviewRequest.objects.filter(pk=review.pk).update(
        requested_at=timezone.now() - timedelta(hours=2)
    )
    samples = scrape()
    assert review.rule_names == ["destructive"]
    assert value(samples, "harness_reviews_pending", rule="destructive") == 1
    assert value(samples, "harness_review_oldest_pending_age_seconds") >= 7200


def test_no_pending_review_reports_age_zero(db):
    assert value(scrape(), "harness_review_oldest_pending_age_seconds") == 0


def test_queue_depth_and_workers_per_queue_come_from_rq(db):
    samples = scrape()
    for queue in ("high", "default", "low"):
        assert value(samples, "harness_queue_depth", queue=queue) is not None
        assert value(samples, "harness_workers", queue=queue) is not None


def test_redis_down_neither_breaks_recording_nor_the_scrape(db, settings, caplog):
    settings.RQ_QUEUES = {
        name: {**conf, "URL": "redis://127.0.0.1:1/0"} for name, conf in settings.RQ_QUEUES.items()
    }
    recorder._reset_after_fork()  # a fresh buffer: this process has not warned yet
    for _ in range(2):
        metric_inc(TOOL_FAILURES, tool="flaky", error_class="transient")
        metrics_flush()
    assert sum("could not write to Redis" in r.getMessage() for r in caplog.records) == 1
    response = Client().get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200
    text = response.content.decode()
    assert 'harness_metrics_source_up{source="redis"} 0.0' in text
    assert 'harness_metrics_source_up{source="database"} 1.0' in text
    assert 'harness_tasks{status="pending"}' in text
