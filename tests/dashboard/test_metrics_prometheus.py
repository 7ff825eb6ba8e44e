"""A real Prometheus (Debian's, which `./harness test` installs) scrapes a running stack — the
live server, real rqworker processes, PostgreSQL, Redis — with the bearer token, and loads
docs/alerts.yml: the series an operator's dashboards and alerts read arrive with the values
the work produced, and every alert rule evaluates healthy."""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness_base.metrics import metrics_read
from review.models import ReviewRequest
from tasks.models import Task
from tests.conftest import ROOT, ApiClient, delete_script, free_port, wait_for
from tests.factories import scripted_task

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
ALERTS = ROOT / "docs" / "alerts.yml"

needs_prometheus = pytest.mark.skipif(
    not Path(PROMETHEUS).exists(), reason="Debian prometheus is not installed"
)
pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True), needs_prometheus]


class Prometheus:
    def __init__(self, url: str, log: Path) -> None:
        self.url = url
        self.log = log

    def api(self, path: str, **params: str) -> dict:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}{query}", timeout=10) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        return body["data"]

    def value(self, query: str) -> float | None:
        """The query's single value now; None while there is no such series."""
        result = self.api("query", query=query)["result"]
        assert len(result) <= 1, result
        return float(result[0]["value"][1]) if result else None

    def wait_value(self, query: str, expected: float, timeout: float = 60.0) -> None:
        """Until the series' last scraped value is `expected`. The last one scraped, not the
        latest scrape's: a scrape that timed out on a loaded machine marks every series stale,
        and a plain query finds none until a scrape succeeds again."""
        seen: list[float | None] = []

        def reached() -> bool:
            seen.append(self.value(f"last_over_time({query}[5m])"))
            return seen[-1] == expected

        try:
            wait_for(reached, timeout, interval=0.25, message=f"{query} == {expected}")
        except AssertionError as exc:
            targets = self.api("targets")["activeTargets"]
            health = [(t["health"], t["lastError"], t["lastScrapeDuration"]) for t in targets]
            # What the exposition would say now, read from Redis here: were the increments
            # lost before they reached Redis, or is it the scrape?
            stored = {m.name: dict(series) for m, series in metrics_read().items()}
            raise AssertionError(
                f"{exc} in Prometheus (last seen: {seen[-1:]}; the target's health, last error "
                f"and scrape seconds: {health}; in Redis now: {stored})\n"
                + self.log.read_text(errors="replace")[-2000:]
            ) from None


@pytest.fixture
def prometheus(live_server, settings, tmp_path: Path) -> Iterator[Prometheus]:
    """Prometheus scraping the live server's /metrics every two seconds with a bearer token
    (and as long to answer: on a loaded two-core machine a scrape took 0.7 s, near the one
    second that a scrape every second is allowed), with
    docs/alerts.yml loaded."""
    token = secrets.token_urlsafe(24)
    settings.HARNESS_METRICS_TOKEN = token
    settings.HARNESS_METRICS_ALLOW = []
    target = urllib.parse.urlsplit(live_server.url).netloc
    config = {
        "global": {"scrape_interval": "2s", "scrape_timeout": "2s", "evaluation_interval": "1s"},
        "rule_files": [str(ALERTS)],
        "scrape_configs": [
            {
                "job_name": "harness",
                "metrics_path": "/metrics",
                "authorization": {"type": "Bearer", "credentials": token},
                "static_configs": [{"targets": [target]}],
            }
        ],
    }
    config_file = tmp_path / "prometheus.yml"
    config_file.write_text(json.dumps(config))  # JSON is YAML
    port = free_port()
    log = tmp_path / "prometheus.log"
    with open(log, "ab") as output:
        process = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={config_file}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    server = Prometheus(f"http://127.0.0.1:{port}", log)

    def ready() -> bool:
        assert process.poll() is None, log.read_text(errors="replace")
        try:
            with urllib.request.urlopen(f"{server.url}/-/ready", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    try:
        wait_for(ready, 60, interval=0.2, message="Prometheus to be ready")
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def test_prometheus_scrapes_the_work_of_real_workers_and_loads_the_alerts(
    prometheus: Prometheus, worker_pool, operator
):
    worker_pool.start(1)
    prometheus.wait_value('up{job="harness"}', 1)
    prometheus.wait_value('harness_workers{queue="default"}', 1)

    flaky = scripted_task(
        [
            {"call": "flaky", "args": {"key": "prom", "fail_times": 1, "error": "permanent"}},
            {"call": "flaky", "args": {"key": "prom", "fail_times": 1, "error": "permanent"}},
            {"final": "done"},
        ],
        ["flaky"],
        user=operator,
        enqueue=True,
    )
    reviewed = scripted_task(
        delete_script(),
        ["delete_file"],
        user=operator,
        enqueue=True,
        workspace={"files": {"old.log": "stale\n"}},
    )

    # A person has a decision to make: the gauge says so, by rule.
    prometheus.wait_value('harness_reviews_pending{rule="destructive"}', 1)
    review = ReviewRequest.objects.get(task=reviewed, status="pending")
    response = ApiClient(operator).decide(review.id, decision="approve", comment="ok")
    assert response.status_code == 200, response.content
    prometheus.wait_value('harness_reviews_pending{rule="destructive"}', 0)
    prometheus.wait_value(
        'harness_review_wait_seconds_count{rule="destructive",outcome="approved"}', 1
    )

    both = Task.objects.filter(id__in=[flaky.id, reviewed.id])
    wait_for(
        lambda: set(both.values_list("status", flat=True)) == {"succeeded"},
        90,
        message="both tasks to succeed",
    )
    prometheus.wait_value('harness_tool_call_duration_seconds_count{tool="flaky"}', 2)
    prometheus.wait_value('harness_tool_call_duration_seconds_count{tool="delete_file"}', 1)
    prometheus.wait_value('harness_tool_failures_total{tool="flaky",error_class="permanent"}', 1)
    prometheus.wait_value("harness_tasks_started_total", 2)
    prometheus.wait_value('harness_tasks_finished_total{outcome="succeeded"}', 2)
    prometheus.wait_value('harness_tasks{status="succeeded"}', 2)
    prometheus.wait_value('harness_tasks{status="waiting_review"}', 0)
    prometheus.wait_value('harness_queue_depth{queue="default"}', 0)
    assert prometheus.value("harness_checkpoint_write_seconds_count") >= 2
    assert prometheus.value("harness_step_duration_seconds_count") >= 3
    assert prometheus.value('harness_metrics_source_up{source="database"}') == 1

    def rules_healthy() -> list[str] | None:
        rules = [r for g in prometheus.api("rules")["groups"] for r in g["rules"]]
        if not rules or any(r["health"] != "ok" for r in rules):
            return None
        return sorted(r["name"] for r in rules)

    names = wait_for(rules_healthy, 30, interval=0.25, message="every alert rule to evaluate ok")
    assert {
        "HarnessReviewWaitingTooLong",
        "HarnessTaskFailureRateHigh",
        "HarnessTasksStalled",
        "HarnessNoWorkers",
    } <= set(names)
    firing = [a["labels"]["alertname"] for a in prometheus.api("alerts")["alerts"]]
    assert "HarnessNoWorkers" not in firing


@pytest.mark.skipif(not Path(PROMTOOL).exists(), reason="Debian prometheus is not installed")
def test_the_alert_rules_pass_promtool():
    checked = subprocess.run(
        [PROMTOOL, "check", "rules", str(ALERTS)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS" in checked.stdout + checked.stderr


@pytest.mark.skipif(not Path(PROMTOOL).exists(), reason="Debian prometheus is not installed")
def test_the_alerts_fire_on_the_harness_series_and_stay_quiet_otherwise():
    tested = subprocess.run(
        [PROMTOOL, "test", "rules", str(Path(__file__).with_name("alerts_test.yml"))],
        capture_output=True,
        text=True,
        check=False,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
