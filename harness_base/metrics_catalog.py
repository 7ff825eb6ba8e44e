"""What harness_base.metrics records: each counter and histogram (`Metric`), its name, help,
labels and buckets, and the list of them a scrape reads (RECORDED)."""

from __future__ import annotations

from dataclasses import dataclass

KEY_PREFIX = "harness:metrics:"

# Seconds: a tool call or a step (tens of ms to minutes), a checkpoint write (sub-ms to
# seconds), a human's review (minutes to days).
FAST_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
CALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
WAIT_BUCKETS = (10.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 4 * 3600.0, 12 * 3600.0, 86400.0)


@dataclass(frozen=True)
class Metric:
    name: str
    help: str
    labels: tuple[str, ...] = ()
    # A histogram's upper bounds (seconds); None for a counter.
    buckets: tuple[float, ...] | None = None
    # Label sets exposed (at zero) before anything is counted, so that rates and ratios over
    # them exist from the first scrape; a metric without labels always has its one series.
    initial: tuple[tuple[str, ...], ...] = ()

    @property
    def key(self) -> str:
        return KEY_PREFIX + self.name


TASKS_STARTED = Metric(
    "harness_tasks_started_total", "Tasks a worker took up for the first time (not resumes)."
)
TASKS_FINISHED = Metric(
    "harness_tasks_finished_total",
    "Tasks that reached a terminal status, by outcome (succeeded, failed, canceled).",
    ("outcome",),
    initial=(("succeeded",), ("failed",), ("canceled",)),
)
STEP_SECONDS = Metric(
    "harness_step_duration_seconds",
    "Duration of one step of a task: a model turn and its tool calls (a graph: a super-step).",
    buckets=CALL_BUCKETS,
)
TOOL_CALL_SECONDS = Metric(
    "harness_tool_call_duration_seconds",
    "Duration of one attempt of a tool call, by tool.",
    ("tool",),
    CALL_BUCKETS,
)
TOOL_FAILURES = Metric(
    "harness_tool_failures_total",
    "Tool call attempts that failed, by tool and error class (transient, permanent, timeout, "
    "...); cancels are not failures.",
    ("tool", "error_class"),
)
REVIEW_WAIT_SECONDS = Metric(
    "harness_review_wait_seconds",
    "Time from a review's request to its decision (or expiry, cancel), by matched rule and "
    "outcome; a review matching two rules counts under both.",
    ("rule", "outcome"),
    WAIT_BUCKETS,
)
SWEEPS = Metric("harness_sweeps_total", "Passes of the sweeper (harness_sweep).")
REDISPATCHES = Metric(
    "harness_redispatches_total",
    "Tasks whose worker was lost, by what the sweep did (redispatched, failed, canceled).",
    ("outcome",),
)
CHECKPOINT_WRITE_SECONDS = Metric(
    "harness_checkpoint_write_seconds",
    "Latency of the loop's durable writes (checkpoint, events, call outcomes, task row).",
    buckets=FAST_BUCKETS,
)
REVIEW_SLA_BREACHES = Metric(
    "harness_review_sla_breaches_total",
    "Reviews decided (or expired) later than a matched rule's target time to decision "
    "(harness.yaml `sla: {decide_within}`, else `review_sla`), by that rule.",
    ("rule",),
)
NOTIFICATION_FAILURES = Metric(
    "harness_notification_delivery_failures_total",
    "Failed attempts to deliver a review notification, by channel.",
    ("channel",),
)
RECORDED = (
    TASKS_STARTED,
    TASKS_FINISHED,
    STEP_SECONDS,
    TOOL_CALL_SECONDS,
    TOOL_FAILURES,
    REVIEW_WAIT_SECONDS,
    REVIEW_SLA_BREACHES,
    SWEEPS,
    REDISPATCHES,
    CHECKPOINT_WRITE_SECONDS,
    NOTIFICATION_FAILURES,
)
