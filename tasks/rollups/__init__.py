"""Statistics roll-ups: the sweep folds settled tool calls into per-hour rows
(`ToolCallHourly`, `ToolCallStepHourly`, `ToolCallDurationHourly`, by `created_at`) and
finished tasks likewise (`TaskHourly`, `TaskWaitHourly`, by `finished_at`), so that the
failure statistics of any window read a few thousand summary rows instead of every call and
task in it.

An hour is rolled once it ended ROLL_LAG ago, oldest first, at most MAX_HOURS_PER_RUN per sweep
(a first sweep over a large history backfills in several runs). Rolling an hour replaces its
rows, so rolling again is always safe. Calls without a final outcome when their hour is rolled
(awaiting review, retry wait, running, unknown outcome) are counted in `RolledHour.unsettled`,
and such hours are rolled again (every RESETTLE_EVERY) while they are younger than
RESETTLE_WITHIN: a call that settles later still reaches the statistics. (A call that settles
later than that is not counted; nor is a call whose final status an operator changes.) A task
that leaves its terminal status (an operator's retry or rollback) marks its finished hour
`stale` (`rollups_task_reopened`, from task_transition), and the sweep rolls that hour again
whatever its age.

Each roll of an hour also re-sums its UTC day into the daily tables (`ToolCallDaily`,
`ToolCallStepDaily`, `ToolCallDurationDaily`, `TaskDaily`, `TaskWaitDaily`: DAILY), so a late
change that rolls an hour again (a call settling, a task reopened) reaches its day too.

The statistics (`dashboard.stats`) read a window's whole UTC days from the daily tables, the
other rolled hours from the hourly ones (`rolled_days_and_hours`), and the rest of the window —
the part of an hour at its start and the hours not rolled yet at its end — from ToolCall.

The modules, from the bottom: `tables` (the call statuses counted, the periods and limits,
the roll-up tables and DAILY), `periods` (hours, days, the rolled span, in_ranges), `queries`
(the aggregations the rolls and the statistics share: histogram buckets, settled calls,
finished tasks, task aggregates, wait histograms), `roll` (hours_roll, days_roll), `advance`
(the roll lock, rollups_task_reopened, rollups_advance and hours_advance). Callers import from
this package.
"""

from __future__ import annotations

from tasks.rollups.advance import hours_advance, roll_lock, rollups_advance, rollups_task_reopened
from tasks.rollups.periods import (
    day_ceil,
    day_floor,
    hour_ceil,
    hour_floor,
    in_ranges,
    rolled_days_and_hours,
    rolled_span,
)
from tasks.rollups.queries import (
    bucket_value,
    calls_failed_q,
    finished_tasks,
    histogram_percentile,
    log_bucket,
    settled_calls,
    task_aggregates,
    wait_histogram,
)
from tasks.rollups.roll import days_roll, hours_roll
from tasks.rollups.tables import (
    BUCKETS_PER_DOUBLING,
    CANCELED_CALL,
    DAILY,
    DAILY_OF,
    DAY,
    FAILED_CALL,
    FINAL_CALL,
    HOUR,
    MAX_HOURS_PER_RUN,
    MAX_RESETTLE_PER_RUN,
    MIN_BUCKETED,
    RESETTLE_EVERY,
    RESETTLE_WITHIN,
    ROLL_LAG,
    ROLL_LOCK,
    ROLLUP_MODELS,
    SETTLED_CALL,
    TASK_COLUMNS,
    TASK_COMBINED,
    TASK_KEYS,
    WAIT_FIELDS,
    Daily,
)

__all__ = [
    "BUCKETS_PER_DOUBLING",
    "CANCELED_CALL",
    "DAILY",
    "DAILY_OF",
    "DAY",
    "FAILED_CALL",
    "FINAL_CALL",
    "HOUR",
    "MAX_HOURS_PER_RUN",
    "MAX_RESETTLE_PER_RUN",
    "MIN_BUCKETED",
    "RESETTLE_EVERY",
    "RESETTLE_WITHIN",
    "ROLLUP_MODELS",
    "ROLL_LAG",
    "ROLL_LOCK",
    "SETTLED_CALL",
    "TASK_COLUMNS",
    "TASK_COMBINED",
    "TASK_KEYS",
    "WAIT_FIELDS",
    "Daily",
    "bucket_value",
    "histogram_percentile",
    "calls_failed_q",
    "day_ceil",
    "day_floor",
    "days_roll",
    "finished_tasks",
    "hour_ceil",
    "hour_floor",
    "hours_advance",
    "hours_roll",
    "in_ranges",
    "log_bucket",
    "roll_lock",
    "rolled_days_and_hours",
    "rolled_span",
    "rollups_advance",
    "rollups_task_reopened",
    "settled_calls",
    "task_aggregates",
    "wait_histogram",
]
