"""Worker (`settings.RQ["WORKER_CLASS"]`, agent.worker.Worker) with its parts: StandbyHorses
(standby) and the supervision of a horse that runs a task (Supervision: the heartbeat, the
kill of a horse that ignores a cancel or is not heard from, the task of a killed horse
settled)."""

from __future__ import annotations

import gc
import threading
import time
from typing import Any

import rq
import rq.utils
from django.conf import settings
from django.db import connections
from rq.defaults import DEFAULT_WORKER_TTL

# Imported here, once in the worker process, so each forked work horse starts with the loop,
# its services and the tool modules loaded instead of importing them per job (hundreds of ms
# of an approval's latency).
from agent.jobs import agent_runners_preload
from agent.runtime import drain
from agent.sweep import task_recover_stalled
from agent.versions import versions_warm_up
from agent.worker.redis_retry import redis_patience
from agent.worker.standby import StandbyHorses
from harness_base.metrics import metrics_flush
from harness_base.versions import harness_version
from tasks import beacon, services
from tasks.events import EventType
from tasks.selectors.workers import COMMIT_FIELD, VERSION_FIELD, worker_name
from tasks.tools.registry import load_tool_modules


def worker_warm_up() -> None:
    """Load the tool modules (built-ins, test tools, HARNESS_TOOL_MODULES), the runners of the
    agent kinds HARNESS_WORKER_PRELOAD names (by default those harness.yaml registers agents
    of) and the tools' argument schemas (agent.versions) before any job; then take what is
    loaded out of the collector's generations (gc.freeze, before any fork, as Python's
    documentation advises): each horse's full collections scan only what its job made, and
    the pages stay shared copy-on-write."""
    load_tool_modules()
    agent_runners_preload()
    versions_warm_up()
    gc.freeze()


def cancel_kill_grace_s() -> float:
    """How long a horse may take to act on a cancel itself (its watchdog notices within a
    heartbeat; a running tool then gets its stop grace) before the supervisor kills it."""
    return 2 * settings.HARNESS_HEARTBEAT_S + 10.0


class Supervision(threading.Thread):
    """Heartbeats one task for its work horse; kills the horse when a cancel is not acted on,
    or when the horse is not heard from by the moment its beacon promised (tasks.beacon): a
    frozen horse would otherwise hold its task until the job's hard timeout. Started after
    the fork and joined before the next one: its database connection (its own, Django's are
    per thread) is never inherited by a horse."""

    def __init__(self, *, worker: Worker, task_id: str, worker_id: str) -> None:
        super().__init__(daemon=True, name=f"supervise-{task_id}")
        self.worker = worker
        self.task_id = task_id
        self.worker_id = worker_id
        self.done = threading.Event()
        # Set when the horse was killed as unresponsive, or still running its task when the
        # worker's drain ran out: its task is redispatched at once.
        self.unresponsive = False

    def _horse_overdue(self) -> bool:
        expected = self.worker.beacon.read()
        now = time.monotonic()
        if expected is None or expected.overdue_s(now) <= 0:
            return False
        self.worker.log.warning(
            "task %s: work horse %s not heard from %.1fs past its %s timeout (%gs) plus the "
            "%gs grace; killing it",
            self.task_id,
            self.worker.horse_pid,
            expected.overdue_s(now),
            expected.layer,
            expected.limit_s,
            settings.HARNESS_HORSE_GRACE_S,
        )
        self._kill_horse(
            type=EventType.HORSE_UNRESPONSIVE,
            payload={
                "layer": expected.layer,
                "limit_s": expected.limit_s,
                "grace_s": settings.HARNESS_HORSE_GRACE_S,
                "overdue_s": round(expected.overdue_s(now), 3),
                "worker": self.worker_id,
            },
        )
        return True

    def _kill_horse(self, *, type: str, payload: dict) -> None:
        """Record why on the task, kill the horse, and have its task redispatched at once."""
        try:
            # Only while the task is still this worker's: woken from a freeze or back from a
            # partition, the worker may find it redispatched to another, which it must not
            # write on (the kill still stops a horse whose writes would be fenced anyway).
            services.event_record_while_held(
                task_id=self.task_id, worker_id=self.worker_id, type=type, payload=payload
            )
        except Exception:  # the kill matters more than its record
            self.worker.log.exception("recording %s for %s failed", type, self.task_id)
        self.unresponsive = True
        self.worker.kill_horse()

    def _drain_over(self) -> bool:
        """The worker is stopping and the horse did not give its task back in HARNESS_DRAIN_S:
        it is killed, and its task redispatched at once."""
        deadline = self.worker.drain_deadline
        if deadline is None or time.monotonic() < deadline:
            return False
        self.worker.log.warning(
            "task %s: not given back within HARNESS_DRAIN_S (%gs); killing work horse %s",
            self.task_id,
            settings.HARNESS_DRAIN_S,
            self.worker.horse_pid,
        )
        self._kill_horse(type=EventType.DRAINED, payload={"worker": self.worker_id, "killed": True})
        return True

    def _wait_s(self) -> float:
        deadline = self.worker.drain_deadline
        if deadline is None:
            return settings.HARNESS_HEARTBEAT_S
        return max(0.0, min(settings.HARNESS_HEARTBEAT_S, deadline - time.monotonic()))

    def run(self) -> None:
        cancel_seen_at: float | None = None
        try:
            while not self.done.wait(self._wait_s()):
                if self._horse_overdue() or self._drain_over():
                    return
                try:
                    cancel = services.task_supervisor_heartbeat(
                        task_id=self.task_id, worker_id=self.worker_id
                    )
                except Exception:
                    self.worker.log.exception("supervising task %s failed", self.task_id)
                    continue
                if not cancel:
                    cancel_seen_at = None
                    continue
                now = time.monotonic()
                if cancel_seen_at is None:
                    cancel_seen_at = now
                elif now - cancel_seen_at > cancel_kill_grace_s():
                    self.worker.log.warning(
                        "task %s: canceled, but its work horse did not stop; killing it",
                        self.task_id,
                    )
                    self.worker.kill_horse()
                    return
        finally:
            connections.close_all()

    def stop(self) -> None:
        self.done.set()
        self.join()


class Worker(StandbyHorses):
    """The harness's RQ worker: tools and runners loaded before any job, a horse that runs a
    task supervised (Supervision), a killed horse's task settled; standby horses
    (StandbyHorses)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Named `host:pid` unless `--name` says otherwise, as /ops/ and the task page show it;
        # RQ's default TTL (420 s) replaced by HARNESS_WORKER_TTL_S, the heartbeat interval
        # /ops/ judges a worker dead by (tasks.selectors.workers).
        kwargs["name"] = kwargs.get("name") or worker_name()
        if kwargs.get("worker_ttl") in (None, DEFAULT_WORKER_TTL):
            kwargs["worker_ttl"] = settings.HARNESS_WORKER_TTL_S
        super().__init__(*args, **kwargs)
        redis_patience(self.connection, settings.HARNESS_REDIS_RETRY_S)
        self._supervised = None
        self._supervision: Supervision | None = None
        self._standby = None
        # Drain (SIGTERM): the horse gives its task back at its next checkpoint, or is killed
        # at this moment (monotonic). The flag is shared with every horse this worker forks.
        self.drain_deadline: float | None = None
        self.drain = drain.DrainFlag()
        drain.install(self.drain)
        # Shared with every horse this worker forks (installed here, inherited by the fork).
        self.beacon = beacon.Beacon()
        beacon.install(self.beacon)
        worker_warm_up()

    def register_birth(self) -> None:
        # A registration under this name is a dead worker's whose pid this process now has
        # (the name is `host:pid` and this process is alive): RQ would refuse to start.
        if self.name == worker_name() and not self.connection.hexists(self.key, "death"):
            self.connection.delete(self.key)
        super().register_birth()
        # The harness this worker runs, for /ops/ (a rolling deploy shows old and new side by
        # side) and for nothing else: the task itself records what wrote it (agent.handback).
        running = harness_version()
        self.connection.hset(
            self.key, mapping={VERSION_FIELD: running["version"], COMMIT_FIELD: running["commit"]}
        )

    def unsubscribe(self) -> None:
        # RQ unsubscribes, then stops its pubsub thread and joins it for up to 1 s: a thread
        # that took the unsubscribe's reply before the stop went back to wait for the next
        # message (60 s), and every other stop of an idle worker took that second. Stopped
        # first, the thread ends on the reply.
        if self.pubsub_thread:
            self.pubsub_thread.stop()
        super().unsubscribe()

    def execute_job(self, job: rq.job.Job, queue: rq.Queue) -> None:
        self._supervised = None
        self._supervision = None
        self.beacon.clear()
        self.drain.clear()
        # Never fork with a database connection open: the horse would share its socket.
        connections.close_all()
        super().execute_job(job, queue)

    def perform_job(self, job: rq.job.Job, queue: rq.Queue, execution: Any) -> bool:
        try:
            return super().perform_job(job, queue, execution)
        finally:
            # A work horse ends with os._exit (no atexit): what it counted goes out now.
            metrics_flush()

    def monitor_work_horse(self, job: rq.job.Job, queue: rq.Queue, execution: Any) -> None:
        if self._supervised is None:
            super().monitor_work_horse(job, queue, execution)
            return
        task_id, worker_id = self._supervised
        if self._stop_requested:  # the stop came between the job's dequeue and its fork
            self.drain_start()
        supervision = Supervision(worker=self, task_id=task_id, worker_id=worker_id)
        self._supervision = supervision
        supervision.start()
        try:
            super().monitor_work_horse(job, queue, execution)
        finally:
            supervision.stop()

    def handle_warm_shutdown_request(self) -> None:
        super().handle_warm_shutdown_request()
        self.drain_start()

    def drain_start(self) -> None:
        """SIGTERM (RQ's warm shutdown: no new job) while a horse runs a task: ask it to give
        the task back at its next checkpoint (agent.runtime.drain), for HARNESS_DRAIN_S."""
        if self._supervised is None or not self.horse_pid or self.drain_deadline is not None:
            return  # idle (RQ stops at once), or already draining
        self.drain.request()
        self.drain_deadline = time.monotonic() + settings.HARNESS_DRAIN_S
        self.log.info(
            "draining: task %s is given back at its next checkpoint (within %gs)",
            self._supervised[0],
            settings.HARNESS_DRAIN_S,
        )

    def handle_work_horse_killed(
        self, job: rq.job.Job, retpid: Any, ret_val: Any, rusage: Any
    ) -> None:
        super().handle_work_horse_killed(job, retpid, ret_val, rusage)
        if self._supervised is None:
            return
        task_id, worker_id = self._supervised
        timeout = job.timeout if isinstance(job.timeout, int | float) and job.timeout > 0 else None
        ran_s = (rq.utils.now() - job.started_at).total_seconds() if job.started_at else 0.0
        try:
            services.task_settle_killed_horse(
                task_id=task_id,
                worker_id=worker_id,
                timed_out_s=timeout if timeout is not None and ran_s > timeout else None,
            )
            if self._supervision is not None and self._supervision.unresponsive:
                # The horse is gone (reaped): redispatch now instead of after the stale time.
                task_recover_stalled(
                    task_id=task_id,
                    stale_after_s=0,
                    max_redispatches=settings.HARNESS_MAX_REDISPATCHES,
                    worker_id=worker_id,
                )
        finally:
            connections.close_all()
