"""`/metrics` for Prometheus: who may scrape (`metrics_access`) and what a scrape reads
(`HarnessCollector`). README "Metrics and alerts" lists every series.

Counters and histograms are what processes recorded into Redis (harness_base.metrics says why
Redis, not prometheus-client's multiprocess mode). Gauges are computed when scraped, from the
source of truth, so they never drift and need no process to keep them: tasks by status
(tasks.selectors.task_status_counts: index counts and hourly roll-ups, fast at millions of
tasks), pending reviews by rule, those past their SLA target, and the oldest one's age (the
pending few, by index), queue depth and workers per queue (RQ's own registries), when the
sweeper last ran. A source that
fails (the database, Redis) leaves its series out and reports `harness_metrics_source_up 0`
instead of failing the scrape."""

from __future__ import annotations

import hmac
import ipaddress
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django.utils import timezone
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString

from dashboard.queues import queue_depths, workers_per_queue
from harness_base.metrics import Series, metrics_read
from review.selectors.rule_labels import reviews_past_target_by_rule, reviews_pending_by_rule
from tasks.selectors import sweep_last_run, task_status_counts, tasks_heartbeat_stale

log = logging.getLogger(__name__)

# Series beyond this many per metric are left out of a scrape (and logged): labels are bounded
# where they are recorded, this bounds the answer even if that ever slips.
MAX_SERIES_PER_METRIC = 1000


def metrics_access(request: HttpRequest) -> tuple[int, str]:
    """(0, "") when the request may scrape; otherwise the status and why. The token is taken
    from the Authorization header only (a query string ends up in access logs)."""
    token, networks = settings.HARNESS_METRICS_TOKEN, settings.HARNESS_METRICS_ALLOW
    if not token and not networks:
        return 403, "metrics are off: set HARNESS_METRICS_TOKEN (or HARNESS_METRICS_ALLOW)\n"
    if networks:
        try:
            address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
        except ValueError:
            address = None
        if address is None or not any(address in net for net in networks):
            return 403, "this address may not scrape metrics (HARNESS_METRICS_ALLOW)\n"
    if token:
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        ok = scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode(), token.encode()
        )
        if not ok:
            return 401, "send Authorization: Bearer <HARNESS_METRICS_TOKEN>\n"
    return 0, ""


class HarnessCollector(Collector):
    def describe(self) -> list[Metric]:
        return []  # nothing to check at registration: the series are known when scraped

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "harness_metrics_source_up",
            "Whether the scrape could read a source (database, redis).",
            labels=["source"],
        )
        for source, part in (
            ("database", _database_gauges),
            ("redis", _redis_metrics),
        ):
            families = _guarded(source, part)
            up.add_metric([source], 1.0 if families is not None else 0.0)
            yield from families or ()
        yield up


def _guarded(source: str, part: Callable[[], list[Metric]]) -> list[Metric] | None:
    try:
        return part()
    except Exception:
        log.exception("metrics: reading %s failed", source)
        return None


def _database_gauges() -> list[Metric]:
    tasks = GaugeMetricFamily("harness_tasks", "Tasks by status.", labels=["status"])
    for status, count in task_status_counts().items():
        tasks.add_metric([status], count)
    stale = GaugeMetricFamily(
        "harness_tasks_heartbeat_stale",
        "Running tasks whose heartbeat is older than HARNESS_STALE_AFTER_S (the sweep "
        "redispatches them; one that stays means no sweep is running).",
        value=tasks_heartbeat_stale(stale_after_s=settings.HARNESS_STALE_AFTER_S),
    )
    pending, oldest = reviews_pending_by_rule()
    reviews = GaugeMetricFamily(
        "harness_reviews_pending",
        "Reviews waiting for a decision, by matched rule (a review matching two rules counts "
        "under both).",
        labels=["rule"],
    )
    for rule, count in sorted(pending.items())[:MAX_SERIES_PER_METRIC]:
        reviews.add_metric([rule], count)
    now = timezone.now()
    age = GaugeMetricFamily(
        "harness_review_oldest_pending_age_seconds",
        "Age of the oldest review waiting for a decision (0: none).",
        value=(now - oldest).total_seconds() if oldest else 0.0,
    )
    late = GaugeMetricFamily(
        "harness_reviews_past_sla",
        "Reviews waiting for a decision longer than a matched rule's target time to decision "
        "(harness.yaml `sla`, else `review_sla`), by that rule.",
        labels=["rule"],
    )
    for rule, count in sorted(reviews_past_target_by_rule(now=now).items())[:MAX_SERIES_PER_METRIC]:
        late.add_metric([rule], count)
    families: list[Metric] = [tasks, stale, reviews, age, late]
    sweep = sweep_last_run()
    if sweep is not None:
        families.append(
            GaugeMetricFamily(
                "harness_sweep_last_run_timestamp_seconds",
                "When the sweeper last finished a pass (Unix time).",
                value=sweep.finished_at.timestamp(),
            )
        )
    return families


def _redis_metrics() -> list[Metric]:
    depth = GaugeMetricFamily("harness_queue_depth", "Jobs waiting in a queue.", labels=["queue"])
    for queue, count in queue_depths().items():
        depth.add_metric([queue], count)
    workers = GaugeMetricFamily(
        "harness_workers", "Live RQ workers listening on a queue.", labels=["queue"]
    )
    for queue, count in workers_per_queue().items():
        workers.add_metric([queue], count)
    families: list[Metric] = [depth, workers]
    for metric, series in metrics_read().items():
        labels = list(metric.labels)
        rows = _bounded(metric.name, sorted(series.items()))
        if metric.buckets is None:
            counter = CounterMetricFamily(metric.name, metric.help, labels=labels)
            for values, one in rows:
                counter.add_metric(list(values), one.value)
            families.append(counter)
        else:
            histogram = HistogramMetricFamily(metric.name, metric.help, labels=labels)
            for values, one in rows:
                histogram.add_metric(list(values), _cumulative(metric.buckets, one), one.sum)
            families.append(histogram)
    return families


def _bounded(name: str, rows: list[Any]) -> Iterable[Any]:
    if len(rows) > MAX_SERIES_PER_METRIC:
        log.warning(
            "metrics: %s has %d series; exposing %d", name, len(rows), MAX_SERIES_PER_METRIC
        )
    return rows[:MAX_SERIES_PER_METRIC]


def _cumulative(bounds: tuple[float, ...], series: Series) -> list[tuple[str, float]]:
    counts = series.buckets or [0] * (len(bounds) + 1)
    out, total = [], 0
    for bound, count in zip((*map(floatToGoString, bounds), "+Inf"), counts, strict=True):
        total += count
        out.append((bound, float(total)))
    return out


registry = CollectorRegistry(auto_describe=False)
registry.register(HarnessCollector())
