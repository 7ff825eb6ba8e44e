"""Counters and histograms of what happens in the harness, recorded where it happens (the loop,
the state machine, reviews, the sweep, notifications) and exposed at `/metrics` by
`dashboard.metrics`.

Why Redis hashes, not prometheus-client's multiprocess mode. Workers are RQ workers that fork a
short-lived work horse per job: multiprocess mode leaves one file per pid (thousands a day, to
be cleaned up while the worker that wrote them may still be scraped), and it aggregates one
host only, while workers run on several. Here every process adds its increments into one Redis
hash per metric (HINCRBY / HINCRBYFLOAT, one field per label set and bucket): shared by every
host that reaches the harness' Redis, nothing to clean up per pid, and the web process that
answers a scrape reads a dozen hashes. Gauges (tasks by status, reviews pending, queue depth,
workers) are not recorded at all: `dashboard.metrics` computes them from the database and RQ
when scraped, so they cannot drift.

Recording never slows or breaks what it counts: an increment goes into an in-process buffer
(a dict under a lock), flushed to Redis in one pipeline at most every FLUSH_S by a daemon
thread, when an RQ job ends (`agent.worker.Worker.perform_job`, before the work horse exits)
and at interpreter exit. A Redis error drops that batch and is logged once per process; the
counters then under-count, which a scrape cannot tell from fewer events (the Redis going away
shows in `harness_metrics_source_up`). Counters live as long as the Redis does, like RQ's own
registries; Prometheus handles a counter that restarts from zero.

Label values are bounded: tool names (the model's choice, from specs and MCP servers) are kept
only when the tool is registered here or comes from a configured MCP server (a graph's or an
SDK agent's tool: when its code registered it), and cut to LABEL_MAX characters; everything
else is `other`. Error classes come from the fixed taxonomy, rule and channel names from
harness.yaml. No task or review ids, ever."""

from __future__ import annotations

import atexit
import bisect
import json
import logging
import os
import re
import threading
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import django_rq

from harness_base.metrics_catalog import (
    CALL_BUCKETS,
    CHECKPOINT_WRITE_SECONDS,
    FAST_BUCKETS,
    NOTIFICATION_FAILURES,
    RECORDED,
    REDISPATCHES,
    REVIEW_SLA_BREACHES,
    REVIEW_WAIT_SECONDS,
    STEP_SECONDS,
    SWEEPS,
    TASKS_FINISHED,
    TASKS_STARTED,
    TOOL_CALL_SECONDS,
    TOOL_FAILURES,
    WAIT_BUCKETS,
    Metric,
)

# Re-exported: callers import the metrics they record from here.
__all__ = [
    "CALL_BUCKETS",
    "CHECKPOINT_WRITE_SECONDS",
    "FAST_BUCKETS",
    "NOTIFICATION_FAILURES",
    "RECORDED",
    "REDISPATCHES",
    "REVIEW_SLA_BREACHES",
    "REVIEW_WAIT_SECONDS",
    "STEP_SECONDS",
    "SWEEPS",
    "TASKS_FINISHED",
    "TASKS_STARTED",
    "TOOL_CALL_SECONDS",
    "TOOL_FAILURES",
    "WAIT_BUCKETS",
    "Metric",
    "Series",
    "label_bounded",
    "metric_inc",
    "metric_observe",
    "metrics_connection",
    "metrics_flush",
    "metrics_read",
]

log = logging.getLogger(__name__)

FLUSH_S = 1.0
LABEL_MAX = 80
OTHER = "other"
_SAFE_LABEL = re.compile(r"^[A-Za-z0-9_.:*-]+$")


def label_bounded(value: Any, known: frozenset[str] | set[str] | None = None) -> str:
    """`value` as a label value if it is one of `known` (or, with `known` None, plain and
    short); otherwise `other`. Hostile names never become a new series each."""
    text = str(value or "")
    if known is not None and text not in known:
        return OTHER
    if not text or len(text) > LABEL_MAX or not _SAFE_LABEL.match(text):
        return OTHER
    return text


def _field(labels: tuple[str, ...], suffix: str = "") -> str:
    # JSON keeps any label value apart from the suffix; the values are bounded already.
    return json.dumps(labels, separators=(",", ":")) + suffix


class _Buffer:
    """This process' increments not yet in Redis: {(key, field): amount}."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ints: dict[tuple[str, str], int] = defaultdict(int)
        self.floats: dict[tuple[str, str], float] = defaultdict(float)
        self.pid = os.getpid()
        self.flusher: threading.Thread | None = None
        self.warned = False


_buffer = _Buffer()


def _reset_after_fork() -> None:
    # A work horse starts with its own empty buffer: the worker's pending increments are the
    # worker's to flush, not to be counted twice.
    global _buffer
    _buffer = _Buffer()


os.register_at_fork(after_in_child=_reset_after_fork)


def _labels(metric: Metric, labels: dict[str, Any]) -> tuple[str, ...]:
    return tuple(label_bounded(labels.get(name)) for name in metric.labels)


def metric_inc(metric: Metric, amount: int = 1, **labels: Any) -> None:
    """Add `amount` to a counter."""
    _add(ints=[((metric.key, _field(_labels(metric, labels))), amount)])


def metric_observe(metric: Metric, seconds: float, **labels: Any) -> None:
    """Count one observation in a histogram: its bucket (the first bound it does not exceed,
    or +Inf; made cumulative when exposed) and its sum."""
    assert metric.buckets is not None, metric.name
    seconds = max(0.0, float(seconds))
    key = _labels(metric, labels)
    index = bisect.bisect_left(metric.buckets, seconds)
    _add(
        ints=[((metric.key, _field(key, f"|{index}")), 1)],
        floats=[((metric.key, _field(key, "|sum")), seconds)],
    )


def _add(
    *, ints: list[tuple[tuple[str, str], int]], floats: Sequence[tuple[tuple[str, str], float]] = ()
) -> None:
    buffer = _buffer
    with buffer.lock:
        for where, amount in ints:
            buffer.ints[where] += amount
        for where, seconds in floats:
            buffer.floats[where] += seconds
        if buffer.flusher is None:
            buffer.flusher = threading.Thread(
                target=_flush_forever, args=(buffer,), name="metrics-flush", daemon=True
            )
            buffer.flusher.start()


def _flush_forever(buffer: _Buffer) -> None:
    stop = threading.Event()
    while not stop.wait(FLUSH_S):
        if buffer is not _buffer:  # forked away: this thread belongs to a parent's buffer
            return
        metrics_flush()


def metrics_flush() -> None:
    """Send this process' pending increments to Redis in one pipeline. Never raises."""
    buffer = _buffer
    with buffer.lock:
        ints, floats = buffer.ints, buffer.floats
        if not ints and not floats:
            return
        buffer.ints, buffer.floats = defaultdict(int), defaultdict(float)
    try:
        pipe = metrics_connection().pipeline(transaction=False)
        for (key, field), amount in ints.items():
            pipe.hincrby(key, field, amount)
        for (key, field), total in floats.items():
            pipe.hincrbyfloat(key, field, total)
        pipe.execute()
    except Exception:
        if not buffer.warned:
            buffer.warned = True
            log.exception("metrics: could not write to Redis; dropping (logged once)")


atexit.register(metrics_flush)


def metrics_connection() -> Any:
    """The harness' Redis (the queues'): every host of a deployment shares it."""
    return django_rq.get_connection("default")


@dataclass
class Series:
    """What Redis holds for one label set of one metric."""

    value: float = 0.0  # a counter's value
    buckets: list[int] | None = None  # a histogram's count per bucket (+Inf last)
    sum: float = 0.0


def metrics_read() -> dict[Metric, dict[tuple[str, ...], Series]]:
    """Every recorded metric's series, summed across processes and hosts (one round trip)."""
    pipe = metrics_connection().pipeline(transaction=False)
    for metric in RECORDED:
        pipe.hgetall(metric.key)
    out: dict[Metric, dict[tuple[str, ...], Series]] = {}
    for metric, raw in zip(RECORDED, pipe.execute(), strict=True):
        out[metric] = _series(metric, raw)
    return out


def _series(metric: Metric, raw: dict[bytes, bytes]) -> dict[tuple[str, ...], Series]:
    series: dict[tuple[str, ...], Series] = {
        labels: Series() for labels in metric.initial or ([()] if not metric.labels else [])
    }
    for field_b, value_b in raw.items():
        field = field_b.decode()
        labels_json, _, suffix = field.partition("|")
        try:
            labels = tuple(json.loads(labels_json))
            value = float(value_b)
        except ValueError:
            continue
        if len(labels) != len(metric.labels):
            continue  # written by a version with other labels
        one = series.setdefault(labels, Series())
        if metric.buckets is None:
            one.value += value
        elif suffix == "sum":
            one.sum += value
        elif suffix.isdigit() and int(suffix) <= len(metric.buckets):
            one.buckets = one.buckets or [0] * (len(metric.buckets) + 1)
            one.buckets[int(suffix)] += int(value)
    return series
