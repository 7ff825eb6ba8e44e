"""`/metrics`: what the loop, the state machine and reviews record, summed in Redis, and the
gauges a scrape computes from the database and RQ (tests/security/test_metrics_access.py
attacks the access rules; test_metrics_prometheus.py scrapes a running stack with Prometheus)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from agent.jobs import run_task as run_task_job
from checkpoints.recovery import task_retry
from harness_base import metrics as recorder
from harness_base import metrics_catalog
from harness_base.metrics import TOOL_FAILURES, metric_inc, metrics_connection, metrics_flush
from review.models import ReviewRequest
from tasks.models import Task
from tasks.rollups import rollups_advance
from tasks.selectors import task_status_counts
from tasks.services import task_transition
from tests.conftest import approve
from tests.durable.graphs import agent_input
from tests.factories import TaskFactory, graph_spec, spec_task

TOKEN = "metrics-test-token"
Samples = dict[tuple[str, frozenset], float]


@pytest.fixture(autouse=True)
def metrics_on(settings, monkeypatch) -> Iterator[None]:
    """Counts under a prefix of this test's own. The Redis database is this xdist process's,
    but any process on it adds to the default keys (a worker or work horse an earlier test
    left finishing its job): a count here must be what this test's own runs recorded."""
    settings.HARNESS_METRICS_TOKEN = TOKEN
    settings.HARNESS_METRICS_ALLOW = []
    recorder.metrics_flush()  # increments pending from before go to the keys they were made for
    prefix = f"harness:metrics:test-{uuid.uuid4().hex}:"
    monkeypatch.setattr(metrics_catalog, "KEY_PREFIX", prefix)
    redis = metrics_connection()
    yield
    recorder.metrics_flush()
    keys = redis.keys(prefix + "*")
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


def run_job(task: Task) -> str:
    """The RQ job of a task (any runner) in this process, as a worker would run it."""
    if Task.objects.values_list("status", flat=True).get(id=task.id) != "queued":
        task_transition(task_id=task.id, to="queued")
    return run_task_job(str(task.id))


@pytest.mark.django_db(transaction=True)
def test_a_graph_s_tool_calls_and_super_steps_are_recorded_like_the_loop_s(harness_yaml, operator):
    harness_yaml('langgraph_graphs:\n  adder: "tests.durable.graphs:adder"\n')
    # Two calls in one turn; the second's arguments are no integers: LangGraph's ToolNode
    # answers it with an error, and the model finishes quoting both answers.
    graph_input = agent_input({"a": 1, "b": 2}, {"a": "one", "b": 2})
    task = spec_task(graph_spec("adder", graph_input), user=operator)
    assert run_job(task) == "succeeded"
    samples = scrape()
    assert value(samples, "harness_tool_call_duration_seconds_count", tool="add") == 2
    failures = "harness_tool_failures_total"
    assert value(samples, failures, tool="add", error_class="permanent") == 1
    # A super-step per node run: the model, the tools node, the model's answer.
    assert value(samples, "harness_step_duration_seconds_count") == 3


@pytest.mark.django_db(transaction=True)
def test_a_pydantic_ai_task_s_tool_calls_and_steps_are_recorded_and_a_replay_is_not(
    harness_yaml, operator, tmp_path
):
    harness_yaml('pydantic_ai_agents:\n  fragile: "tests.durable.pai_agents:fragile_agent"\n')
    spec = {
        "title": "fragile",
        "goal": "run fragile",
        "agent": {
            "kind": "pydantic-ai",
            "name": "fragile",
            "input": json.dumps({"marker_dir": str(tmp_path)}),
        },
    }
    task = spec_task(spec, user=operator)
    # `write` succeeds (a step), then `fragile` raises RuntimeError: the task fails.
    assert run_job(task) == "failed"
    samples = scrape()
    count = "harness_tool_call_duration_seconds_count"
    assert value(samples, count, tool="write") == 1
    assert value(samples, count, tool="fragile") == 1
    failures = "harness_tool_failures_total"
    assert value(samples, failures, tool="fragile", error_class="tool_crashed") == 1
    assert value(samples, failures, tool="write", error_class="tool_crashed") is None
    assert value(samples, "harness_step_duration_seconds_count") == 1

    # Retried once the workspace lets it: `fragile` runs again, `write` is replayed (no call).
    (task.workspace_path / "ok").write_text("")
    task_retry(task_id=task.id, user=operator, reason="fixed")
    assert run_job(task) == "succeeded"
    samples = scrape()
    assert value(samples, count, tool="write") == 1
    assert value(samples, count, tool="fragile") == 2
    assert value(samples, failures, tool="fragile", error_class="tool_crashed") == 1


@pytest.mark.django_db(transaction=True)
def test_openai_agents_tasks_tool_calls_and_steps_are_recorded_across_a_review(
    harness_yaml, operator, api_client
):
    harness_yaml(
        "openai_agents:\n"
        '  writer: "tests.durable.openai_agents:writer"\n'
        '  breaks: "tests.durable.openai_agents:breaks"\n'
    )
    # Turns: write a.txt; write b.txt + record; publish (reviewed: the task pauses); answer.
    task = spec_task(agent_spec("writer"), user=operator)
    assert run_job(task) == "paused"
    review = ReviewRequest.objects.get(task_id=task.id)
    assert api_client(operator).decide(review.id, decision="approve").status_code == 200
    assert run_job(task) == "succeeded"
    # Turns: write a.txt; fetch, which raises ConnectionError: the task fails.
    broken = spec_task(agent_spec("breaks"), user=operator)
    assert run_job(broken) == "failed"

    samples = scrape()
    count = "harness_tool_call_duration_seconds_count"
    assert value(samples, count, tool="write_file") == 3
    assert value(samples, count, tool="record") == 1
    assert value(samples, count, tool="publish") == 1
    assert value(samples, count, tool="fetch") == 1
    failures = "harness_tool_failures_total"
    assert value(samples, failures, tool="fetch", error_class="transient") == 1
    assert value(samples, failures, tool="write_file", error_class="transient") is None
    # A step is a model turn and the calls it asked for (the reviewed one's ran after the
    # resume); the answering turn and the turn the failure ended count none: 3 + 1.
    assert value(samples, "harness_step_duration_seconds_count") == 4


def agent_spec(name: str) -> dict:
    return {
        "title": name,
        "goal": f"task {uuid.uuid4().hex}: do it",
        "agent": {"kind": "openai-agents", "name": name},
    }


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
    for queue in ("resume", "high", "default", "low"):
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


@pytest.mark.django_db(transaction=True)
def test_reviews_past_their_target_and_late_decisions_count_by_rule(
    harness_yaml, paused_review, operator
):
    """harness_reviews_past_sla (open past the rule's target, now) and
    harness_review_sla_breaches_total (decided past it), under the rule whose target it was."""
    harness_yaml(
        "review_rules:\n"
        "  - {name: destructive, risk: destructive, action: review, sla: {decide_within: 30m}}\n"
    )
    late, on_time, waiting = paused_review(), paused_review(), paused_review()
    now = timezone.now()
    for review, minutes in ((late, 45), (on_time, 10), (waiting, 31)):
        ReviewRequest.objects.filter(pk=review.pk).update(
            requested_at=now - timedelta(minutes=minutes)
        )
    approve(late, operator)
    approve(on_time, operator)
    samples = scrape()
    assert value(samples, "harness_review_sla_breaches_total", rule="destructive") == 1
    assert value(samples, "harness_reviews_past_sla", rule="destructive") == 1
