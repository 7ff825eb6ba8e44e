"""A worker's Redis commands wait out a lost connection (Redis restarted, failed over, the
network blipping) instead of ending the worker.

RQ retries a broken connection only where the worker waits for a job. Anywhere else (the
heartbeat while a horse runs, the horse recording its job's end, the worker settling up after
it) the error reaches RQ's work loop, which logs "found an unhandled exception, quitting" and
exits: a Redis restart of a few seconds took the busy workers down with it, and their tasks
waited for the sweep. redis-py's own default (10 retries, jittered waits capped at 1 s: about
2 s, 4 at most) is shorter than a restart on a loaded host. With `patient_retry` every command
of the worker, its horses and its scheduler (they share its connection's settings) retries for
HARNESS_REDIS_RETRY_S; past that it fails as before, and the process manager restarts the
worker."""

from __future__ import annotations

import math

from redis import Redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

# Waits of 0.1, 0.2, 0.4, 0.8, then 1 s each: a restart is noticed within a second.
BACKOFF_BASE_S = 0.05
BACKOFF_CAP_S = 1.0


def patient_retry(budget_s: float) -> Retry:
    """Retries on a connection error or timeout whose waits add up to `budget_s` (none at 0)."""
    if not math.isfinite(budget_s) or budget_s < 0:
        raise ValueError(f"HARNESS_REDIS_RETRY_S={budget_s!r}: expected seconds, 0 or more")
    backoff = ExponentialBackoff(cap=BACKOFF_CAP_S, base=BACKOFF_BASE_S)
    retries, waited = 0, 0.0
    while waited < budget_s:
        retries += 1
        waited += backoff.compute(retries)
    return Retry(backoff, retries)


def redis_patience(connection: Redis, budget_s: float) -> None:
    """Give `connection` (and every connection its pool makes from now on) `patient_retry`."""
    connection.set_retry(patient_retry(budget_s))
