"""The RQ worker class for harness jobs (`settings.RQ["WORKER_CLASS"]`).

RQ runs each job in a forked work horse and waits for it in the worker process. That process
is a separate interpreter, so the harness uses it for what must not depend on the horse being
responsive: while a horse runs a task, a supervisor thread here heartbeats the task (a horse
stuck inside one call is seen as busy, not dead, and is not redispatched to a second worker)
and kills a horse that does not act on a cancel; a horse that was killed (cancel, or the job's
hard timeout) has its task settled here.

The horse is forked before its job arrives (Standby): while the worker waits on Redis, the next
horse already exists, in its own process group, connected to PostgreSQL and Redis, blocked on a
pipe. A dequeued job is handed to it over the pipe instead of paying the fork and two fresh
connections while an operator waits for an approved call to run (bench/approval.py). From the
handoff on it is RQ's work horse like any other: the worker waits for it, heartbeats and
supervises it, kills it and settles its task exactly as for a horse forked for the job."""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import socket
import threading
import time
from typing import Any

import rq
import rq.utils
from django.conf import settings
from django.db import connection, connections
from rq.executions import Execution

# Imported here, once in the worker process, so each forked work horse starts with the loop,
# its services and the tool modules loaded instead of importing them per job (hundreds of ms
# of an approval's latency).
from agent.jobs import agent_runners_preload
from agent.sweep import task_recover_stalled
from harness_base.metrics import metrics_flush
from tasks import beacon, services
from tasks.events import EventType
from tasks.tools.registry import load_tool_modules


def worker_warm_up() -> None:
    """Load the tool modules (built-ins, test tools, HARNESS_TOOL_MODULES) and the runners of
    the agent kinds HARNESS_WORKER_PRELOAD names (by default those harness.yaml registers
    agents of) before any job; then take what is loaded out of the collector's generations
    (gc.freeze, before any fork, as Python's documentation advises): each horse's full
    collections scan only what its job made, and the pages stay shared copy-on-write."""
    load_tool_modules()
    agent_runners_preload()
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
        # Set when the horse was killed as unresponsive: its task is redispatched at once.
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
        try:
            # Only while the task is still this worker's: woken from a freeze or back from a
            # partition, the worker may find it redispatched to another, which it must not
            # write on (the kill still stops a horse whose writes would be fenced anyway).
            services.event_record_while_held(
                task_id=self.task_id,
                worker_id=self.worker_id,
                type=EventType.HORSE_UNRESPONSIVE,
                payload={
                    "layer": expected.layer,
                    "limit_s": expected.limit_s,
                    "grace_s": settings.HARNESS_HORSE_GRACE_S,
                    "overdue_s": round(expected.overdue_s(now), 3),
                    "worker": self.worker_id,
                },
            )
        except Exception:  # the kill matters more than its record
            self.worker.log.exception("recording horse_unresponsive for %s failed", self.task_id)
        self.unresponsive = True
        self.worker.kill_horse()
        return True

    def run(self) -> None:
        cancel_seen_at: float | None = None
        try:
            while not self.done.wait(settings.HARNESS_HEARTBEAT_S):
                if self._horse_overdue():
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


def _standby_wait(fd: int) -> dict[str, Any] | None:
    """In a standby horse: the job its worker hands it (one line on the pipe), or None once the
    worker is gone without one (the pipe's end, or a new parent: a process the worker forked
    later, RQ's scheduler, may hold a copy of the pipe and keep it open)."""
    parent = os.getppid()
    received = b""
    while not received.endswith(b"\n"):
        if not select.select([fd], [], [], 1.0)[0]:
            if os.getppid() != parent:
                return None
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            return None
        received += chunk
    os.close(fd)
    return json.loads(received)


class Standby:
    """A work horse forked ahead of its job, waiting for it on a pipe (the worker's side).

    The worker writes the job once, as one line, and closes its end; a worker that exits (or
    dies) without a job for it ends it too."""

    def __init__(self, *, pid: int, fd: int) -> None:
        self.pid = pid
        self.fd = fd

    def alive(self) -> bool:
        try:
            return os.waitpid(self.pid, os.WNOHANG) == (0, 0)  # reaps it when it is gone
        except ChildProcessError:
            return False

    def hand(self, message: dict[str, Any]) -> bool:
        """Give the horse its job; False (and the horse is gone) when it cannot take it."""
        try:
            if not self.alive():
                return False
            os.write(self.fd, json.dumps(message).encode() + b"\n")
            return True
        except OSError:  # it died since: the worker forks a horse for the job instead
            self.discard()
            return False
        finally:
            self._close()

    def discard(self) -> None:
        """End the idle horse (its worker stops)."""
        self._close()
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass

    def _close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class Worker(rq.Worker):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._supervised: tuple[str, str] | None = None
        self._supervision: Supervision | None = None
        self._standby: Standby | None = None
        # Shared with every horse this worker forks (installed here, inherited by the fork).
        self.beacon = beacon.Beacon()
        beacon.install(self.beacon)
        worker_warm_up()

    def execute_job(self, job: rq.job.Job, queue: rq.Queue) -> None:
        self._supervised = None
        self._supervision = None
        self.beacon.clear()
        # Never fork with a database connection open: the horse would share its socket.
        connections.close_all()
        super().execute_job(job, queue)

    def perform_job(self, job: rq.job.Job, queue: rq.Queue, execution: Any) -> bool:
        try:
            return super().perform_job(job, queue, execution)
        finally:
            # A work horse ends with os._exit (no atexit): what it counted goes out now.
            metrics_flush()

    def dequeue_job_and_maintain_ttl(self, *args: Any, **kwargs: Any) -> Any:
        self._standby_ready()  # the next job's horse exists before the job does
        return super().dequeue_job_and_maintain_ttl(*args, **kwargs)

    def teardown(self) -> None:
        if self._standby is not None and not self.is_horse:
            self._standby.discard()
            self._standby = None
        super().teardown()

    def _standby_ready(self) -> None:
        if self._standby is not None and self._standby.alive():
            return
        # As before any fork: no database connection of this process, no supervision thread.
        connections.close_all()
        read_fd, write_fd = os.pipe()
        # A stop signal (RQ raises StopRequested from its handler) is held until each side
        # knows which it is: the worker then has the horse to end, the horse is in its own
        # process group with a horse's signal handling.
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        pid = os.fork()
        if pid == 0:
            try:
                os.close(write_fd)
                os.setpgrp()  # as RQ's horse: kill_horse signals the horse's own group
                self.setup_work_horse_signals()
                signal.pthread_sigmask(signal.SIG_SETMASK, held)
                self._standby_main(read_fd)
            finally:
                os._exit(1)  # never back into the worker's loop
        os.close(read_fd)
        self._standby = Standby(pid=pid, fd=write_fd)
        signal.pthread_sigmask(signal.SIG_SETMASK, held)

    def _standby_main(self, read_fd: int) -> None:
        """The forked horse: connect, wait for a job on the pipe, run it as RQ's horse would."""
        self._is_horse = True
        self._standby = None
        try:
            connection.ensure_connection()
            self.connection.ping()
        except Exception:  # the job connects again itself (and reports what fails)
            connections.close_all()
        message = _standby_wait(read_fd)
        if message is None:
            os._exit(0)  # the worker stopped without a job for this horse
        # The wait may have been long: a connection the server or the network ended since is
        # replaced now rather than failing the job's first query.
        if connection.connection is not None and not connection.is_usable():
            connection.close()
        try:
            self.connection.ping()
        except Exception:
            self.connection.connection_pool.disconnect()
        os.environ["RQ_WORKER_ID"] = self.name
        os.environ["RQ_JOB_ID"] = message["job"]
        job = self.job_class.fetch(
            message["job"], connection=self.connection, serializer=self.serializer
        )
        queue = self.queue_class(
            message["queue"],
            connection=self.connection,
            job_class=self.job_class,
            serializer=self.serializer,
            death_penalty_class=self.death_penalty_class,
        )
        execution = Execution(
            id=message["execution"],
            job_id=job.id,
            connection=self.connection,
            worker_name=self.name,
        )
        execution._job = job
        self.executions = {execution.id: execution}
        self.main_work_horse(job, queue)  # exits the process

    def fork_work_horse(self, job: rq.job.Job, queue: rq.Queue) -> None:
        standby, self._standby = self._standby, None
        message = {"job": job.id, "queue": queue.name, "execution": self.execution.id}
        if standby is not None and standby.hand(message):
            os.environ["RQ_WORKER_ID"] = self.name
            os.environ["RQ_JOB_ID"] = job.id
            self._horse_pid = standby.pid
            self.procline(f"Handed {job.id} to {standby.pid} at {time.time()}")
        else:
            super().fork_work_horse(job, queue)  # returns in the worker process only
        if job.func_name == services.RUN_TASK_JOB and job.args:
            self._supervised = (str(job.args[0]), f"{socket.gethostname()}:{self.horse_pid}")

    def monitor_work_horse(self, job: rq.job.Job, queue: rq.Queue, execution: Any) -> None:
        if self._supervised is None:
            super().monitor_work_horse(job, queue, execution)
            return
        task_id, worker_id = self._supervised
        supervision = Supervision(worker=self, task_id=task_id, worker_id=worker_id)
        self._supervision = supervision
        supervision.start()
        try:
            super().monitor_work_horse(job, queue, execution)
        finally:
            supervision.stop()

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
