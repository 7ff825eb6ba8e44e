"""Dead RQ workers unregistered (the sweep): a worker /ops/ shows dead (tasks.selectors.workers)
is kept there for HARNESS_WORKER_DEAD_SHOWN_S after the sweep first saw it dead, then removed
from RQ's registry. Its task is the stalled-task sweep's (redispatch or an unknown-outcome
review), as for any dead work horse."""

from __future__ import annotations

from django.conf import settings
from django.utils import timezone

from tasks.selectors.workers import DEAD_SINCE_FIELD, rq_workers, worker_dead

_MARK = """
if redis.call('EXISTS', KEYS[1]) == 0 then return nil end
redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])
return redis.call('HGET', KEYS[1], ARGV[1])
"""


def workers_dead_forget() -> int:
    """Note when each dead worker was first seen dead; unregister those seen dead for
    HARNESS_WORKER_DEAD_SHOWN_S. -> how many were unregistered."""
    now = timezone.now()
    forgotten = 0
    for worker in rq_workers():
        if not worker_dead(worker, now=now):
            continue
        # Of several sweepers the first sighting counts; a key that expired meanwhile is not
        # brought back (as a hash with no TTL).
        since = worker.connection.eval(_MARK, 1, worker.key, DEAD_SINCE_FIELD, now.timestamp())
        # Strictly longer: the sweep that first sees a worker dead never removes it.
        if (
            since is not None
            and now.timestamp() - float(since) > settings.HARNESS_WORKER_DEAD_SHOWN_S
        ):
            worker.register_death()
            forgotten += 1
    return forgotten
