"""The statistics' roll-ups (written only by tasks.rollups, from the sweep).

The failure statistics read whole, rolled-up hours from these tables and only the window's
ragged edges (less than an hour at the start, the not-yet-rolled hours at the end) from
ToolCall and Task, so a 30-day window costs about what a 1-hour window does. The *Daily
tables sum the hours of each UTC day: a window's whole days read those, its other hours the
hourly rows. Each kind of count is a pair of tables (per hour, per day) over one abstract
`*Counts` base; RolledHour records which hours are rolled."""

from __future__ import annotations

from django.db import models

from tasks.states import ToolCallStatus


class ToolCallCounts(models.Model):
    """Settled tool calls of a period × tool × status × error class × attempts."""

    tool = models.CharField(max_length=100)
    status = models.CharField(max_length=20, choices=ToolCallStatus.choices)
    error_class = models.CharField(max_length=50, blank=True, default="")
    attempts = models.PositiveIntegerField()
    calls = models.PositiveIntegerField()

    class Meta:
        abstract = True


class ToolCallHourly(ToolCallCounts):
    """ToolCallCounts per hour of `created_at`."""

    hour = models.DateTimeField()

    class Meta:
        constraints = [
            # Leading `hour`, covering `calls`: every window read is an index-only scan.
            models.UniqueConstraint(
                fields=["hour", "tool", "status", "error_class", "attempts"],
                include=["calls"],
                name="toolcallhourly_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H:00} {self.tool} {self.status}: {self.calls}"


class ToolCallDaily(ToolCallCounts):
    """ToolCallHourly summed over one UTC day (tasks.rollups keeps it in step with the hours):
    a window of days reads a day's row per key, not 24."""

    day = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["day", "tool", "status", "error_class", "attempts"],
                include=["calls"],
                name="toolcalldaily_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.day:%Y-%m-%d} {self.tool} {self.status}: {self.calls}"


class ToolCallStepCounts(models.Model):
    """Settled tool calls of a period × step index (the statistics' failure rate per step)."""

    step_index = models.PositiveIntegerField()
    calls = models.PositiveIntegerField()
    failed = models.PositiveIntegerField()

    class Meta:
        abstract = True


class ToolCallStepHourly(ToolCallStepCounts):
    """ToolCallStepCounts per hour of `created_at`."""

    hour = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["hour", "step_index"],
                include=["calls", "failed"],
                name="toolcallstephourly_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H:00} step {self.step_index}: {self.calls}"


class ToolCallStepDaily(ToolCallStepCounts):
    """ToolCallStepHourly summed over one UTC day."""

    day = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["day", "step_index"],
                include=["calls", "failed"],
                name="toolcallstepdaily_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.day:%Y-%m-%d} step {self.step_index}: {self.calls}"


class ToolCallDurationCounts(models.Model):
    """Settled calls with a measured duration of a period × tool × log-scale duration bucket
    (`tasks.rollups.log_bucket`): percentiles of any window merge these histograms."""

    tool = models.CharField(max_length=100)
    bucket = models.IntegerField()
    calls = models.PositiveIntegerField()

    class Meta:
        abstract = True


class ToolCallDurationHourly(ToolCallDurationCounts):
    """ToolCallDurationCounts per hour of `created_at`."""

    hour = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["hour", "tool", "bucket"],
                include=["calls"],
                name="toolcalldurationhourly_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H:00} {self.tool} bucket {self.bucket}: {self.calls}"


class ToolCallDurationDaily(ToolCallDurationCounts):
    """ToolCallDurationHourly summed over one UTC day."""

    day = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["day", "tool", "bucket"],
                include=["calls"],
                name="toolcalldurationdaily_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.day:%Y-%m-%d} {self.tool} bucket {self.bucket}: {self.calls}"


class TaskCounts(models.Model):
    """Tasks that finished (terminal status) in a period × status × error class × error
    fingerprint × `calls_failed`: the statistics' task outcomes (with how many had a call
    rejected or edited by a person), failure groups and error mix, and the time those tasks
    waited for a human — for a review and, apart from it, held by an operator
    (`waited_review` / `waited_held`: how many waited at all)."""

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


class TaskHourly(TaskCounts):
    """TaskCounts per hour of `finished_at`."""

    hour = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["hour", "status", "error_class", "error_fingerprint", "calls_failed"],
                name="taskhourly_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H:00} {self.status} {self.error_class}: {self.tasks}"


class TaskDaily(TaskCounts):
    """TaskHourly over one UTC day (sums; first_seen, last_seen and sample: min / max)."""

    day = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["day", "status", "error_class", "error_fingerprint", "calls_failed"],
                name="taskdaily_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.day:%Y-%m-%d} {self.status} {self.error_class}: {self.tasks}"


class TaskWaitCounts(models.Model):
    """Finished tasks that waited for a human in a period × kind ("review" or "held") ×
    log-scale bucket of the seconds waited (`tasks.rollups.log_bucket`): the wait percentiles
    of any window merge these histograms."""

    kind = models.CharField(max_length=10)
    bucket = models.IntegerField()
    tasks = models.PositiveIntegerField()

    class Meta:
        abstract = True


class TaskWaitHourly(TaskWaitCounts):
    """TaskWaitCounts per hour of `finished_at`."""

    hour = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["hour", "kind", "bucket"], include=["tasks"], name="taskwaithourly_key"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H:00} {self.kind} bucket {self.bucket}: {self.tasks}"


class TaskWaitDaily(TaskWaitCounts):
    """TaskWaitHourly summed over one UTC day."""

    day = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["day", "kind", "bucket"], include=["tasks"], name="taskwaitdaily_key"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.day:%Y-%m-%d} {self.kind} bucket {self.bucket}: {self.tasks}"


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
