"""Threads of a run: the heartbeat watchdog and `InThread`, which bounds a model or tool call
by a deadline even when the call ignores its own timeout."""

from __future__ import annotations

import contextvars
import logging
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

from django.db import connection, connections

from tasks import beacon, services
from tasks.models import Task

log = logging.getLogger(__name__)


# Idle threads kept for the next call: starting a thread and joining it cost a few hundred
# microseconds on a loaded machine, twice a step (the model call, the tool call).
IDLE_THREADS = 4
_idle: list[_CallThread] = []
_idle_lock = threading.Lock()


class _CallThread(threading.Thread):
    """A daemon thread running the calls handed to it, one at a time; between calls it waits
    in `_idle`. A call that overruns keeps its thread until it returns (the caller has moved
    on: `InThread`); the thread then goes back to the pool, or ends when the pool is full."""

    def __init__(self) -> None:
        super().__init__(daemon=True, name="call")
        self.jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()

    def run(self) -> None:
        while True:
            self.jobs.get()()
            with _idle_lock:
                if len(_idle) >= IDLE_THREADS:
                    return
                _idle.append(self)


def _run_in_thread(job: Callable[[], None], name: str) -> None:
    with _idle_lock:
        thread = _idle.pop() if _idle else None
    if thread is None:
        thread = _CallThread()
        thread.name = name
        thread.start()
    else:
        thread.name = name
    thread.jobs.put(job)


def _forget_threads_after_fork() -> None:
    """A forked child (RQ's work horse) has none of its parent's threads."""
    global _idle_lock
    _idle.clear()
    _idle_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_threads_after_fork)


class InThread:
    """Runs `func()` in a daemon thread so the caller can stop waiting at a deadline. A call
    that overruns is abandoned: its late result or error is never read. The thread closes its
    own database connections (Django's are per thread) after each call. Threads are reused
    from call to call (`_CallThread`).

    The run promises its worker to be back within `timeout_s` (plus the grace) as the `layer`
    whose timeout it is (tasks.beacon) before the call starts: a horse stopped at any moment
    of the call is judged by the call's timeout, never by the bookkeeping's."""

    def __init__(self, func: Callable[[], Any], *, name: str, layer: str, timeout_s: float) -> None:
        self.layer = layer
        self.timeout_s = timeout_s
        self.value: Any = None
        self.error: BaseException | None = None
        self._done = threading.Event()

        def target() -> None:
            try:
                self.value = func()
            except BaseException as exc:  # handed back to the loop thread
                self.error = exc
            finally:
                try:
                    connections.close_all()
                finally:
                    self._done.set()

        # In the caller's context: its log context and current span (agent.tracing).
        context = contextvars.copy_context()
        beacon.expect(layer, timeout_s)
        _run_in_thread(lambda: context.run(target), name)

    def wait(self, timeout_s: float | None = None) -> bool:
        """True when the call finished within `timeout_s` (the call's own timeout unless
        given: a grace after it) from now, which the run promises its worker as well."""
        within = self.timeout_s if timeout_s is None else timeout_s
        beacon.expect(self.layer, within)
        done = self._done.wait(within)
        beacon.progress()
        return done


class Watchdog(threading.Thread):
    """Heartbeats the task every few seconds from its own DB connection, even while a long
    tool call runs, and notices a cancel request or a lost lease: it then sets `stop` and the
    stop event of the running tool call (`watch_call`), so a cancel also stops the tool."""

    def __init__(self, *, task_id: Any, epoch: int, interval_s: float) -> None:
        super().__init__(daemon=True, name=f"heartbeat-{task_id}")
        self.task_id = task_id
        self.epoch = epoch
        self.interval_s = interval_s
        self.stop = threading.Event()
        self.cancel_requested = threading.Event()
        self.lease_lost = threading.Event()
        # The global checkpoint round the task must prepare for (None: none asked).
        self.hold_round_id: Any = None
        self._done = threading.Event()
        # Guards `_call_stop` against a halt racing with a call starting or ending.
        self._lock = threading.Lock()
        self._call_stop: threading.Event | None = None

    def watch_call(self, stop: threading.Event | None) -> None:
        """Halting also sets `stop` (the running call's own event); None when no call runs."""
        with self._lock:
            self._call_stop = stop
            if stop is not None and self.stop.is_set():
                stop.set()

    def _halt(self) -> None:
        with self._lock:
            self.stop.set()
            if self._call_stop is not None:
                self._call_stop.set()

    def run(self) -> None:
        try:
            while not self._done.wait(self.interval_s):
                if not services.task_heartbeat(task_id=self.task_id, epoch=self.epoch):
                    self.lease_lost.set()
                    self._halt()
                    return
                cancel, hold = (
                    Task.objects.filter(id=self.task_id)
                    .values_list("cancel_requested", "hold_round_id")
                    .get()
                )
                self.hold_round_id = hold
                if cancel:
                    self.cancel_requested.set()
                    self._halt()
        except Exception:  # the loop's own fenced writes will notice a broken database
            log.exception("heartbeat for task %s failed", self.task_id)
        finally:
            connection.close()

    def finish(self) -> None:
        self._done.set()
