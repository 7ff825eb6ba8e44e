"""Puts the wall clock of a process (the harness's view of it) off the true time by the number
of seconds written in the file HARNESS_CLOCK_OFFSET_FILE names, read again at most every 0.5 s:
what a worker machine whose clock is stepped (NTP, an operator, a VM resumed) looks like to the
harness. The chaos suite (bench/chaos/) puts this directory first on PYTHONPATH of one worker
host's processes; Python imports `sitecustomize` at start-up.

It moves `time.time` and Django's `timezone.now` (every reading of the wall clock the harness
makes goes through one of them), never the monotonic clock, as a clock step does not.
libfaketime would move the C library's clocks instead, but Debian bookworm's (0.9.10) hangs
Python's timed waits (`threading.Event.wait`) when it moves the monotonic clock too and makes
every `time.sleep` fail (EINVAL) when told not to."""

from __future__ import annotations

import os
import time

_FILE = os.environ.get("HARNESS_CLOCK_OFFSET_FILE", "")
_true_time = time.time
_cache = {"offset": 0.0, "read_at": float("-inf")}


def offset_s() -> float:
    now = time.monotonic()
    if now - _cache["read_at"] >= 0.5:
        _cache["read_at"] = now
        try:
            with open(_FILE) as fh:
                _cache["offset"] = float(fh.read().strip() or 0)
        except (OSError, ValueError):
            pass
    return _cache["offset"]


def _time() -> float:
    return _true_time() + offset_s()


if _FILE:
    import datetime

    from django.utils import timezone

    _true_now = timezone.now

    def _now() -> datetime.datetime:
        return _true_now() + datetime.timedelta(seconds=offset_s())

    time.time = _time
    timezone.now = _now
