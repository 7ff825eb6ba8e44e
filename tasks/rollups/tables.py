"""What is rolled up: the call statuses the statistics count, the periods and limits of the
rolls, the histograms' resolution, the roll-up tables (ROLLUP_MODELS) and their daily sums
(DAILY)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.db.models import Aggregate, Max, Min, Q, Sum

from tasks.errors import CANCELED_ERROR
from tasks.models import (
    RolledHour,
    TaskDaily,
    TaskHourly,
    TaskWaitDaily,
    TaskWaitHourly,
    ToolCallDaily,
    ToolCallDurationDaily,
    ToolCallDurationHourly,
    ToolCallHourly,
    ToolCallStatus,
    ToolCallStepDaily,
    ToolCallStepHourly,
)
from tasks.models import rollups as rollup_models

S = ToolCallStatus
FAILED_CALL = (S.FAILED, S.TIMED_OUT, S.UNKNOWN_OUTCOME)
# Calls with an outcome. Denied / rejected calls are policy decisions, not tool failures.
SETTLED_CALL = (S.SUCCEEDED, *FAILED_CALL)
# A call stopped because an operator canceled its task: `failed` with this error class, but an
# operator's decision, not the tool's failure. Every statistic leaves it out (`settled_calls`),
# like denied and rejected calls. Both columns are in ToolCall's `toolcall_stats` index and in
# ToolCallHourly's key, so the filter costs no heap access.
CANCELED_CALL = Q(status=S.FAILED, error_class=CANCELED_ERROR)
# Statuses no call leaves again (an unknown outcome is settled for the statistics but an
# operator's decision may still turn it into a success or a failure).
FINAL_CALL = (S.SUCCEEDED, S.FAILED, S.TIMED_OUT, S.DENIED, S.REJECTED)

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
ROLL_LAG = timedelta(minutes=5)
RESETTLE_WITHIN = timedelta(days=2)
RESETTLE_EVERY = timedelta(minutes=2)
MAX_HOURS_PER_RUN = 48
MAX_RESETTLE_PER_RUN = 48
# Histogram resolution (call durations, human waits): BUCKETS_PER_DOUBLING buckets per factor
# of two, so a bucket's geometric middle is within 2^(1/16) - 1 ≈ 4.4% of every value in it.
BUCKETS_PER_DOUBLING = 8
MIN_BUCKETED = 0.001
# The SweepRun rows whose lock a roll holds (roll_lock): the task roll-ups' and the review
# roll-ups' (review.rollups).
ROLL_LOCK = "rollups"

# Every table a roll of an hour replaces (RolledHour, the record of the roll, last).
ROLLUP_MODELS = (
    ToolCallHourly,
    ToolCallStepHourly,
    ToolCallDurationHourly,
    TaskHourly,
    TaskWaitHourly,
    RolledHour,
)

# The key of a task roll-up row (after its period), and what is summed, min'd or max'd over it.
TASK_KEYS = TaskHourly.KEY
# How a task roll-up's columns combine over hours (the others are sums).
TASK_COMBINED = {"first_seen": Min, "last_seen": Max, "sample": Max}
TASK_COLUMNS = (
    "tasks",
    "first_seen",
    "last_seen",
    "sample",
    "with_rejected",
    "with_edited",
    "waited_review",
    "review_wait_sum",
    "waited_held",
    "held_wait_sum",
)


@dataclass(frozen=True)
class Daily:
    """A daily table: the sums over each UTC day of an hourly one's rows with equal keys (the
    key of both tables after its period: tasks.models.rollups)."""

    hourly: type[rollup_models.Hourly]
    daily: type[rollup_models.Daily]
    # {column: aggregate over the day's hours}
    columns: dict[str, type[Aggregate]]

    @property
    def keys(self) -> tuple[str, ...]:
        return self.hourly.KEY


DAILY = (
    Daily(ToolCallHourly, ToolCallDaily, {"calls": Sum}),
    Daily(ToolCallStepHourly, ToolCallStepDaily, {"calls": Sum, "failed": Sum}),
    Daily(ToolCallDurationHourly, ToolCallDurationDaily, {"calls": Sum}),
    Daily(
        TaskHourly, TaskDaily, {column: TASK_COMBINED.get(column, Sum) for column in TASK_COLUMNS}
    ),
    Daily(TaskWaitHourly, TaskWaitDaily, {"tasks": Sum}),
)
# The daily table of each hourly one.
DAILY_OF = {table.hourly: table for table in DAILY}

# The time a finished task waited for a human, by kind: for a review, and held by an operator
# (kept apart: a task held and resumed never waited for a review).
WAIT_FIELDS = {"review": "review_wait_s", "held": "held_wait_s"}
