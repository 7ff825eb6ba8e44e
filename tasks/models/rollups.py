"""The statistics' roll-ups (written only by tasks.rollups, from the sweep).

The failure statistics read whole, rolled-up hours from these tables and only the window's
ragged edges (less than an hour at the start, the not-yet-rolled hours at the end) from
ToolCall and Task, so a 30-day window costs about what a 1-hour window does. The *Daily
tables sum the hours of each UTC day: a window's whole days read those, its other hours the
hourly rows. Each kind of count is one abstract `*Counts` base (its fields, its KEY and INCLUDE,
how a row reads) and a pair of tables built from it, per hour and per day (`Hourly`, `Daily`:
the period's column, the unique key that leads with it); RolledHour records which hours are
rolled."""

from __future__ import annotations

from typing import ClassVar, Protocol

from django.db import models

from tasks.states import ToolCallStatus


class Period(models.Model):
    """A roll-up row's period. A `*Counts` base names its KEY (the columns that, after the
    period's, make a row unique), its INCLUDE (the counts the key's index covers, so a window
    read is an index-only scan) and `describe` (the row after its period, for the admin)."""

    KEY: ClassVar[tuple[str, ...]] = ()
    INCLUDE: ClassVar[tuple[str, ...]] = ()

    class Meta:
        abstract = True

    def describe(self) -> str:
        raise NotImplementedError


class Hourly(Period):
    """Per hour (of `created_at` for tool calls, `finished_at` for tasks)."""

    hour = models.DateTimeField()

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H:00} {self.describe()}"


class Daily(Period):
    """The hourly rows summed over one UTC day (tasks.rollups keeps them in step with the
    hours): a window of days reads a day's row per key, not 24."""

    day = models.DateTimeField()

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.day:%Y-%m-%d} {self.describe()}"


class Keyed(Protocol):
    """What `period_key` reads of a `*Counts` base (the abstract class itself)."""

    @property
    def KEY(self) -> tuple[str, ...]: ...

    @property
    def INCLUDE(self) -> tuple[str, ...]: ...


def period_key(counts: Keyed, period: str) -> list[models.BaseConstraint]:
    """The unique key of a table of `counts` per `period` ("hour" or "day"), leading with the
    period; named after the table (`<model>_key`)."""
    return [
        models.UniqueConstraint(
            fields=[period, *counts.KEY], include=counts.INCLUDE or None, name="%(class)s_key"
        )
    ]


class ToolCallCounts(Period):
    """Settled tool calls of a period × tool × status × error class × attempts."""

    KEY = ("tool", "status", "error_class", "attempts")
    INCLUDE = ("calls",)

    tool = models.CharField(max_length=100)
    status = models.CharField(max_length=20, choices=ToolCallStatus.choices)
    error_class = models.CharField(max_length=50, blank=True, default="")
    attempts = models.PositiveIntegerField()
    calls = models.PositiveIntegerField()

    class Meta:
        abstract = True

    def describe(self) -> str:
        return f"{self.tool} {self.status}: {self.calls}"


class ToolCallHourly(ToolCallCounts, Hourly):
    class Meta:
        constraints = period_key(ToolCallCounts, "hour")


class ToolCallDaily(ToolCallCounts, Daily):
    class Meta:
        constraints = period_key(ToolCallCounts, "day")


class ToolCallStepCounts(Period):
    """Settled tool calls of a period × step index (the statistics' failure rate per step)."""

    KEY = ("step_index",)
    INCLUDE = ("calls", "failed")

    step_index = models.PositiveIntegerField()
    calls = models.PositiveIntegerField()
    failed = models.PositiveIntegerField()

    class Meta:
        abstract = True

    def describe(self) -> str:
        return f"step {self.step_index}: {self.calls}"


class ToolCallStepHourly(ToolCallStepCounts, Hourly):
    class Meta:
        constraints = period_key(ToolCallStepCounts, "hour")


class ToolCallStepDaily(ToolCallStepCounts, Daily):
    class Meta:
        constraints = period_key(ToolCallStepCounts, "day")


class ToolCallDurationCounts(Period):
    """Settled calls with a measured duration of a period × tool × log-scale duration bucket
    (`tasks.rollups.log_bucket`): percentiles of any window merge these histograms."""

    KEY = ("tool", "bucket")
    INCLUDE = ("calls",)

    tool = models.CharField(max_length=100)
    bucket = models.IntegerField()
    calls = models.PositiveIntegerField()

    class Meta:
        abstract = True

    def describe(self) -> str:
        return f"{self.tool} bucket {self.bucket}: {self.calls}"


class ToolCallDurationHourly(ToolCallDurationCounts, Hourly):
    class Meta:
        constraints = period_key(ToolCallDurationCounts, "hour")


class ToolCallDurationDaily(ToolCallDurationCounts, Daily):
    class Meta:
        constraints = period_key(ToolCallDurationCounts, "day")


class TaskCounts(Period):
    """Tasks that finished (terminal status) in a period × status × error class × error
    fingerprint × `calls_failed`: the statistics' task outcomes (with how many had a call
    rejected or edited by a person), failure groups and error mix, and the time those tasks
    waited for a human — for a review and, apart from it, held by an operator
    (`waited_review` / `waited_held`: how many waited at all). Summed over a day, first_seen,
    last_seen and sample are the min / max."""

    KEY = ("status", "error_class", "error_fingerprint", "calls_failed")

    status = models.CharField(max_length=20)
    error_class = models.CharField(max_length=50, blank=True, default="")
    error_fingerprint = models.CharField(max_length=16, blank=True, default="")
    calls_failed = models.BooleanField()
    tasks = models.PositiveIntegerField()
    # min / max finished_at of the group.
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    # max(error_message) of the group: the failure groups' sample message.
    sample = models.TextField(blank=True, default="")
    # How many of the group's tasks had a call a person rejected / approved edited.
    with_rejected = models.PositiveIntegerField(default=0)
    with_edited = models.PositiveIntegerField(default=0)
    waited_review = models.PositiveIntegerField()
    review_wait_sum = models.FloatField()
    waited_held = models.PositiveIntegerField()
    held_wait_sum = models.FloatField()

    class Meta:
        abstract = True

    def describe(self) -> str:
        return f"{self.status} {self.error_class}: {self.tasks}"


class TaskHourly(TaskCounts, Hourly):
    class Meta:
        constraints = period_key(TaskCounts, "hour")


class TaskDaily(TaskCounts, Daily):
    class Meta:
        constraints = period_key(TaskCounts, "day")


class TaskWaitCounts(Period):
    """Finished tasks that waited for a human in a period × kind ("review" or "held") ×
    log-scale bucket of the seconds waited (`tasks.rollups.log_bucket`): the wait percentiles
    of any window merge these histograms."""

    KEY = ("kind", "bucket")
    INCLUDE = ("tasks",)

    kind = models.CharField(max_length=10)
    bucket = models.IntegerField()
    tasks = models.PositiveIntegerField()

    class Meta:
        abstract = True

    def describe(self) -> str:
        return f"{self.kind} bucket {self.bucket}: {self.tasks}"


class TaskWaitHourly(TaskWaitCounts, Hourly):
    class Meta:
        constraints = period_key(TaskWaitCounts, "hour")


class TaskWaitDaily(TaskWaitCounts, Daily):
    class Meta:
        constraints = period_key(TaskWaitCounts, "day")


class RolledHour(models.Model):
    """One row per hour the roll-ups cover (empty hours included, so the covered span is
    contiguous): tool calls by `created_at`, tasks by `finished_at`. `unsettled`: calls of that
    hour that had no final outcome when it was rolled; the sweep rolls such an hour again while
    it is young (tasks.rollups.RESETTLE_WITHIN). `stale`: a task that finished in it left its
    terminal status since (an operator's retry or rollback); the sweep rolls it again."""

    hour = models.DateTimeField(unique=True)
    unsettled = models.PositiveIntegerField(default=0)
    stale = models.BooleanField(default=False)
    rolled_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H:00} ({self.unsettled} unsettled)"
