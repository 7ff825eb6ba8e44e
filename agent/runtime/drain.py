"""Drain: a worker told to stop (SIGTERM) asks the work horse running a task to give the task
back at its next checkpoint, so another worker continues it at once instead of after the
stale-heartbeat window (agent.worker, HARNESS_DRAIN_S).

The request is one byte of anonymous shared memory the worker maps before it forks (as the
progress beacon, tasks.beacon): the worker sets it from its signal handler, the horse's loop
reads it at each boundary (between model turns, between tool calls), where resuming elsewhere
from the newest checkpoint is exact. Outside a worker nothing is installed and nothing is
ever requested."""

from __future__ import annotations

import mmap

from agent.runtime.run import Run
from tasks import services


class DrainFlag:
    """One shared byte between a worker (writer) and the horses it forks (readers)."""

    def __init__(self) -> None:
        self._map = mmap.mmap(-1, 1)

    def request(self) -> None:
        self._map[0] = 1

    def clear(self) -> None:
        self._map[0] = 0

    def is_set(self) -> bool:
        return self._map[0] == 1


_installed: DrainFlag | None = None


def install(flag: DrainFlag | None) -> None:
    """The worker installs its flag before it forks: the horse inherits it."""
    global _installed
    _installed = flag


def drain_requested() -> bool:
    return _installed is not None and _installed.is_set()


def drain_release(run: Run) -> str:
    """Between steps, with a drain requested: write what the run has not written yet and give
    the task back (queued, its job enqueued) in the same transaction."""
    released: list[bool] = []
    run.commit(
        trigger=None,
        then=lambda checkpoint: released.append(
            services.task_release_drained(
                task_id=run.task_id, epoch=run.epoch, worker_id=run.worker_id
            )
        ),
    )
    return "drained" if released == [True] else "lease_lost"
