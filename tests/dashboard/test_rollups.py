"""Statistics roll-ups: after the sweep folds whole hours into per-hour rows and whole UTC days
into daily sums, every statistic of a window is what the raw calls give (durations within the
histogram's resolution), and a call that settles after its hour was rolled still arrives."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from dashboard import stats
from dashboard.windows import window_parse
from tasks.errors import error_fingerprint
from tasks.models import RolledHour, TaskDaily, ToolCall, ToolCallDaily
from tasks.rollups import (
    DAILY,
    FINAL_CALL,
    HOUR,
    RESETTLE_EVERY,
    ROLL_LAG,
    hour_floor,
    rollups_advance,
)
from tasks.services import task_transition
from tests.factories import TaskFactory, ToolCallFactory

pytestmark = pytest.mark.django_db

COUNTED = ("by_tool", "by_step", "over_time", "heatmap", "retries", "groups", "waits")


@pytest.fixture
def history():
    """Three days of calls at random minutes, every status and error class, plus one call
    still awaiting review."""
    rng = random.Random(17)
    now = timezone.now()
    task = TaskFactory()
    outcomes = [
        ("succeeded", ""),
        ("succeeded", ""),
        ("failed", "permanent"),
        ("failed", "transient"),
        ("timed_out", "timeout"),
        ("unknown_outcome", "unknown_outcome"),
        ("denied", "denied"),
    ]
    for _ in range(400):
        status, error_class = rng.choice(outcomes)
        ToolCallFactory(
            task=task,
            tool=rng.choice(["read_file", "write_file", "http_request"]),
            status=status,
            created_at=now - timedelta(minutes=rng.uniform(1, 3 * 24 * 60)),
            error_class=error_class,
            attempts=rng.choice([0, 1, 1, 2, 3]),
            step_index=rng.randrange(6),
            duration_ms=rng.choice([None, rng.uniform(0.5, 900)]),
        )
    pending = ToolCallFactory(
        task=task, tool="write_file", status="awaiting_review", created_at=now - timedelta(hours=5)
    )
    # Tasks finished at random minutes: every terminal status, two failure fingerprints,
    # successes after failed calls, and waits for review and holds of every size.
    failures = [("timeout", "session timeout: 60s exceeded"), ("model_error", "no turns left")]
    for _ in range(120):
        status = rng.choice(["succeeded", "succeeded", "failed", "canceled"])
        error_class, message = rng.choice(failures) if status == "failed" else ("", "")
        TaskFactory(
            status=status,
            finished_at=now - timedelta(minutes=rng.uniform(1, 3 * 24 * 60)),
            error_class=error_class,
            error_message=message,
            error_fingerprint=error_fingerprint(error_class, message) if error_class else "",
            calls_failed=rng.random() < 0.3,
            review_wait_s=rng.choice([0, 0, rng.uniform(1, 4 * 3600)]),
            held_wait_s=rng.choice([0, 0, 0, rng.uniform(1, 600)]),
        )
    old_failure = TaskFactory(
        status="failed",
        finished_at=now - timedelta(days=2, hours=12),
        error_class="timeout",
        error_message=failures[0][1],
        error_fingerprint=error_fingerprint(*failures[0]),
        review_wait_s=300,
    )
    return {"now": now, "task": task, "pending": pending, "old_failure": old_failure}


def roll_all(now) -> None:
    """Sweep until the roll-ups caught up (a sweep rolls at most MAX_HOURS_PER_RUN hours)."""
    while rollups_advance(now=now):
        pass


def statistics(now, since="7d"):
    window = window_parse(since=since, bucket=None, now=now)
    return stats.failure_statistics(window)


def assert_as_raw(rolled, raw) -> None:
    """The statistics read from roll-ups are those of the raw rows (the durations within the
    histograms' resolution)."""
    for key in COUNTED:
        assert rolled[key] == raw[key], key
    assert rolled["tasks"] == raw["tasks"]
    assert [(d["tool"], d["calls"]) for d in rolled["durations"]] == [
        (d["tool"], d["calls"]) for d in raw["durations"]
    ]
    for exact, approx in zip(raw["durations"], rolled["durations"], strict=True):
        assert approx["p50_ms"] == pytest.approx(exact["p50_ms"], rel=0.05)


def test_rolled_up_statistics_equal_the_raw_ones(history):
    now = history["now"]
    for since in ("7d", "24h", "90m"):
        raw = statistics(now, since)
        roll_all(now)
        assert RolledHour.objects.exists()
        assert_as_raw(statistics(now, since), raw)


def test_rolled_hours_cover_history_up_to_the_lag_contiguously(history):
    now = history["now"]
    roll_all(now)
    hours = list(RolledHour.objects.order_by("hour").values_list("hour", flat=True))
    oldest = ToolCall.objects.order_by("created_at").first().created_at
    assert hours[0] == hour_floor(oldest)
    assert hours[-1] == hour_floor(now - ROLL_LAG) - HOUR
    assert all(b - a == HOUR for a, b in zip(hours, hours[1:], strict=False))
    # Rolling again changes nothing.
    before = statistics(now)
    assert rollups_advance(now=now) == 0
    assert statistics(now) == before


def test_call_settling_after_its_hour_was_rolled_reaches_the_statistics(history):
    now = history["now"]
    roll_all(now)
    pending = history["pending"]
    hour = hour_floor(pending.created_at)
    # The random history may put other unsettled calls (unknown outcome) in the same hour.
    unsettled = ToolCall.objects.filter(created_at__gte=hour, created_at__lt=hour + HOUR).exclude(
        status__in=FINAL_CALL
    )
    assert RolledHour.objects.get(hour=hour).unsettled == unsettled.count() >= 1
    before = {row["tool"]: row for row in statistics(now)["by_tool"]}["write_file"]

    ToolCall.objects.filter(id=pending.id).update(status="failed", error_class="permanent")
    rollups_advance(now=now + RESETTLE_EVERY)

    after = {row["tool"]: row for row in statistics(now)["by_tool"]}["write_file"]
    assert (after["calls"], after["failed"]) == (before["calls"] + 1, before["failed"] + 1)
    assert RolledHour.objects.get(hour=hour).unsettled == unsettled.count()
    assert not unsettled.filter(id=pending.id).exists()


def test_task_that_leaves_its_terminal_status_is_taken_out_of_its_rolled_hour(history):
    """An operator retries a task that failed two and a half days ago (older than any hour the
    sweep rolls again on its own): its hour is marked stale and rolled again, so the failure
    no longer counts, as in the raw rows."""
    now = history["now"]
    roll_all(now)
    old = history["old_failure"]
    hour = hour_floor(old.finished_at)
    before = statistics(now)

    task_transition(task_id=old.id, to="queued", reason="retry")
    assert RolledHour.objects.get(hour=hour).stale
    assert rollups_advance(now=now) == 1
    assert not RolledHour.objects.get(hour=hour).stale

    after = statistics(now)
    assert after["tasks"]["failed"] == before["tasks"]["failed"] - 1

    def group(result):
        return {g["fingerprint"]: g["tasks"] for g in result["groups"]}[old.error_fingerprint]

    def reviewed(result):
        return {w["kind"]: w["tasks"] for w in result["waits"]}["review"]

    assert group(after) == group(before) - 1
    assert reviewed(after) == reviewed(before) - 1
    # What the raw rows say once no roll-up is left.
    RolledHour.objects.all().delete()
    raw = statistics(now)
    assert raw["tasks"] == after["tasks"]
    for key in COUNTED:
        assert raw[key] == after[key], key


# Mid-afternoon: a window of days starts and ends inside a day.
NOW = datetime(2026, 12, 4, 14, 37, tzinfo=UTC)


def test_a_window_of_days_reads_the_daily_sums_and_equals_the_raw_figures():
    """Whole UTC days of a window come from the daily sums, the hours around them from the
    hourly rows; a day whose hour is rolled again (a task an operator retries, a call that
    settles late) is summed again."""
    rng = random.Random(30)
    task = TaskFactory()
    outcomes = [("succeeded", ""), ("failed", "permanent"), ("timed_out", "timeout")]
    for _ in range(300):  # over five UTC days
        status, error_class = rng.choice(outcomes)
        ToolCallFactory(
            task=task,
            tool=rng.choice(["read_file", "write_file"]),
            status=status,
            created_at=NOW - timedelta(minutes=rng.uniform(1, 5 * 24 * 60)),
            error_class=error_class,
            attempts=rng.choice([1, 1, 2]),
            step_index=rng.randrange(4),
            duration_ms=rng.uniform(0.5, 900),
        )
    for _ in range(80):
        status = rng.choice(["succeeded", "failed"])
        TaskFactory(
            status=status,
            finished_at=NOW - timedelta(minutes=rng.uniform(1, 5 * 24 * 60)),
            error_class="timeout" if status == "failed" else "",
            error_message="session timeout: 60s exceeded" if status == "failed" else "",
            error_fingerprint=error_fingerprint("timeout", "x") if status == "failed" else "",
            calls_failed=rng.random() < 0.3,
            review_wait_s=rng.choice([0, rng.uniform(1, 3600)]),
        )
    # Inside whole days of the window: a failure an operator will retry (older than any hour
    # the sweep rolls again on its own) and a call still awaiting review.
    retried = TaskFactory(
        status="failed",
        finished_at=datetime(2026, 12, 2, 9, 20, tzinfo=UTC),
        error_class="timeout",
        error_message="session timeout: 60s exceeded",
        error_fingerprint=error_fingerprint("timeout", "x"),
    )
    late = ToolCallFactory(
        task=task,
        tool="write_file",
        status="awaiting_review",
        created_at=datetime(2026, 12, 3, 8, 10, tzinfo=UTC),
    )
    windows = [
        window_parse(since="4d", bucket=None, now=NOW),  # daily buckets
        window_parse(since="4d", bucket="hour", now=NOW),  # hourly buckets: read the hours
        window_parse(since="2026-12-01T00:00", bucket=None, now=NOW),  # starts at midnight
    ]
    raw = [stats.failure_statistics(window) for window in windows]
    roll_all(NOW)
    whole_days = [datetime(2026, 12, d, tzinfo=UTC) for d in (1, 2, 3)]
    for model in (ToolCallDaily, TaskDaily):
        assert set(model.objects.values_list("day", flat=True)) >= set(whole_days)
    for window, exact in zip(windows, raw, strict=True):
        assert_as_raw(stats.failure_statistics(window), exact)

    task_transition(task_id=retried.id, to="queued", reason="retry")
    ToolCall.objects.filter(id=late.id).update(status="failed", error_class="permanent")
    later = NOW + RESETTLE_EVERY
    assert rollups_advance(now=later) == 2
    rolled = [stats.failure_statistics(window) for window in windows]
    assert rolled[0]["tasks"]["failed"] == raw[0]["tasks"]["failed"] - 1
    by_tool = {row["tool"]: row for row in rolled[0]["by_tool"]}
    before = {row["tool"]: row for row in raw[0]["by_tool"]}
    assert by_tool["write_file"]["failed"] == before["write_file"]["failed"] + 1

    # The whole days' hourly rows are not what a window of days reads.
    day = {"hour__gte": whole_days[0], "hour__lt": whole_days[-1] + timedelta(days=1)}
    for table in DAILY:
        table.hourly.objects.filter(**day).delete()
    assert stats.failure_statistics(windows[0]) == rolled[0]
    assert stats.failure_statistics(windows[2]) == rolled[2]
    # What the raw rows say once no roll-up is left.
    RolledHour.objects.all().delete()
    for window, figures in zip(windows, rolled, strict=True):
        assert_as_raw(figures, stats.failure_statistics(window))
