"""The sweep's step (`rollups_advance`, and `hours_advance`, which the review roll-ups share),
the roll lock (`roll_lock`), and a reopened task marking its hour stale
(`rollups_task_reopened`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from django.db import transaction
from django.db.models import Min, Model, Q

from tasks.models import RolledHour, SweepRun, Task, ToolCall
from tasks.rollups.periods import hour_floor, rolled_span
from tasks.rollups.roll import hours_roll
from tasks.rollups.tables import (
    HOUR,
    MAX_HOURS_PER_RUN,
    MAX_RESETTLE_PER_RUN,
    RESETTLE_EVERY,
    RESETTLE_WITHIN,
    ROLL_LAG,
    ROLL_LOCK,
)
from tasks.states import TERMINAL


def roll_lock(*, name: str = ROLL_LOCK, wait: bool = False) -> bool:
    """Take the roll-up lock `name` for the current transaction; False if another transaction
    holds it (or, with `wait`, block until it is free). Lock contract: the SweepRun row named
    `name` (select_for_update); taken after any task or review row."""
    rows = SweepRun.objects.filter(name=name)
    rows = rows.select_for_update() if wait else rows.select_for_update(skip_locked=True)
    if rows.exists():
        return True
    # Not there yet (made once, by the first roll or change), or held by another transaction.
    SweepRun.objects.get_or_create(
        name=name, defaults={"started_at": _epoch(), "finished_at": _epoch()}
    )
    return rows.exists()


def rollups_task_reopened(*, finished_at: datetime) -> None:
    """A task that finished at `finished_at` is leaving its terminal status (task_transition,
    in its transaction): mark that hour stale, so the sweep rolls it again.

    Holds the roll-up lock until the transaction ends, so that no roll can read the task as
    finished and then record the hour as fresh: a roll that already ran left a row to mark, a
    roll that runs next reads the task reopened."""
    roll_lock(wait=True)
    RolledHour.objects.filter(hour=hour_floor(finished_at)).update(stale=True)


def _epoch() -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC)


def rollups_advance(*, now: datetime) -> int:
    """The sweep's step: roll the next finished hours, then the stale hours and the young hours
    that had unsettled calls. Returns how many hours were rolled. Safe to run from several
    sweepers at once (one rolls, the others skip)."""
    with transaction.atomic():
        if not roll_lock():
            return 0
        span = rolled_span()
        if span is None:
            oldest = [
                ToolCall.objects.aggregate(at=Min("created_at"))["at"],
                Task.objects.filter(status__in=TERMINAL).aggregate(at=Min("finished_at"))["at"],
            ]
            if not any(oldest):
                return 0
            start = hour_floor(min(at for at in oldest if at is not None))
        else:
            start = span[1]
        return hours_advance(
            start=start, now=now, rolled=RolledHour, open_field="unsettled", roll=hours_roll
        )


def hours_advance(
    *,
    start: datetime,
    now: datetime,
    rolled: type[Model],
    open_field: str,
    roll: Callable[..., None],
) -> int:
    """Under the caller's roll lock: `roll` the finished hours from `start` (at most
    MAX_HOURS_PER_RUN), then the `rolled` hours marked stale and the young ones that had
    `open_field` things still open, oldest roll first. Returns how many hours were rolled."""
    stop = min(hour_floor(now - ROLL_LAG), start + MAX_HOURS_PER_RUN * HOUR)
    count = 0
    if start < stop:
        roll(start=start, stop=stop, now=now)
        count += int((stop - start) / HOUR)
    young_and_open = Q(
        **{f"{open_field}__gt": 0},
        hour__gte=now - RESETTLE_WITHIN,
        rolled_at__lte=now - RESETTLE_EVERY,
    )
    again = rolled._default_manager.filter(Q(stale=True) | young_and_open).order_by(
        "rolled_at", "hour"
    )
    for hour in list(again[:MAX_RESETTLE_PER_RUN].values_list("hour", flat=True)):
        roll(start=hour, stop=hour + HOUR, now=now)
        count += 1
    return count
