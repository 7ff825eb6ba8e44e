"""The horse forked before its job arrives: `standby_wait` (the horse's side of the pipe),
Standby (the worker's side) and StandbyHorses (part of Worker: agent.worker.worker), the
worker's forking of the next horse while it waits on Redis and its handing a job over."""

from __future__ import annotations

import ctypes
import json
import logging
import os
import select
import signal
import socket
import time
from typing import Any

import rq
from django.db import connection, connections
from rq.executions import Execution

from tasks import services

log = logging.getLogger(__name__)

# Loaded in the worker, before any fork: a horse only calls it.
_LIBC = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int | None) -> None:
    """In a work horse: the kernel kills it (SIGKILL) the moment its worker dies, however the
    worker dies (kill -9 included), and the horse's sandbox follows it (bubblewrap's
    --die-with-parent, agent.tools.sandbox). A worker that died before this took effect has
    already left the horse with another parent: it ends now."""
    if _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        log.warning("prctl(PR_SET_PDEATHSIG) failed: errno %d", ctypes.get_errno())
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(1)


def standby_wait(fd: int) -> dict[str, Any] | None:
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


class StandbyHorses(rq.Worker):
    """Worker's standby horses: forked ahead of the job, handed it, ended with the worker.
    `_standby` is set by `Worker.__init__`."""

    # Set by Worker.__init__: the idle horse forked ahead of the next job, and the task (with
    # the worker's id for it) the horse just forked runs.
    _standby: Standby | None
    _supervised: tuple[str, str] | None

    def setup_work_horse_signals(self) -> None:
        super().setup_work_horse_signals()  # in the horse, standby or forked for its job
        die_with_parent(self.pid)

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
        message = standby_wait(read_fd)
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
        execution = self.execution
        assert execution is not None  # RQ's execute_job prepared it before the fork
        message = {"job": job.id, "queue": queue.name, "execution": execution.id}
        if standby is not None and standby.hand(message):
            os.environ["RQ_WORKER_ID"] = self.name
            os.environ["RQ_JOB_ID"] = job.id
            self._horse_pid = standby.pid
            self.procline(f"Handed {job.id} to {standby.pid} at {time.time()}")
        else:
            super().fork_work_horse(job, queue)  # returns in the worker process only
        if job.func_name == services.RUN_TASK_JOB and job.args:
            self._supervised = (str(job.args[0]), f"{socket.gethostname()}:{self.horse_pid}")
