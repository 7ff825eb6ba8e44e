"""The progress beacon: how a work horse tells its worker by when it will make progress again.

RQ runs each job in a forked work horse; the worker process supervises it (agent.worker). A
horse can stop making progress while the worker stays up: SIGSTOP, a debugger, a read stuck
in the kernel on a dead mount, a deadlock, a C call holding the interpreter lock. Its own
heartbeat thread may even keep running. So the horse's main thread declares, as it enters each
phase of the run, the moment by which it will be heard from again: the phase's own timeout
(the model call's turn timeout, the tool's timeout, ...) plus `HARNESS_HORSE_GRACE_S` for the
bookkeeping around it. The worker reads the beacon on every heartbeat and kills a horse whose
moment has passed (agent.worker.Supervision); the task is then redispatched and the ledger
keeps each side effect single.

The beacon is a few bytes of anonymous shared memory the worker maps before it forks: a write
is a store into memory, no system call, no lock and no I/O, so a phase declared every step
costs nothing measurable. Writes go through a sequence counter (a seqlock), so the reader never
takes half of one write for a whole one. Outside a worker (the in-process runner, a shell) no
beacon is installed and `expect` does nothing.

Long bookkeeping that loops (a workspace snapshot of many files) calls `progress()` as it goes:
the horse is judged by whether it moves, not by how long the work is."""

from __future__ import annotations

import mmap
import struct
import threading
import time
from dataclasses import dataclass

from django.conf import settings

# seq (even: stable), deadline (CLOCK_MONOTONIC seconds; 0: nothing expected), the phase's
# own limit in seconds, the layer's name.
_LAYOUT = struct.Struct("<Qdd24s")


@dataclass(frozen=True)
class Expectation:
    layer: str
    limit_s: float
    deadline: float

    def overdue_s(self, now: float) -> float:
        return now - self.deadline


class Beacon:
    """One shared slot between a worker (reader) and the horse it forks (writer)."""

    def __init__(self) -> None:
        # An anonymous MAP_SHARED mapping: the same physical page in the worker and its horses.
        self._map = mmap.mmap(-1, _LAYOUT.size)

    def write(self, layer: str, limit_s: float, deadline: float) -> None:
        seq = _LAYOUT.unpack_from(self._map, 0)[0] + 1  # odd: a write is in progress
        struct.pack_into("<Q", self._map, 0, seq)
        _LAYOUT.pack_into(self._map, 0, seq, deadline, limit_s, layer.encode()[:24])
        struct.pack_into("<Q", self._map, 0, seq + 1)

    def clear(self) -> None:
        """Nothing expected (before a fork, and once a job ends)."""
        self.write("", 0.0, 0.0)

    def read(self) -> Expectation | None:
        """What the horse last promised; None when it promised nothing."""
        for _ in range(100):
            seq, deadline, limit_s, layer = _LAYOUT.unpack_from(self._map, 0)
            if seq % 2 == 0 and struct.unpack_from("<Q", self._map, 0)[0] == seq:
                if not deadline:
                    return None
                return Expectation(layer.rstrip(b"\0").decode(errors="replace"), limit_s, deadline)
        return None  # a writer kept it busy: read again at the next heartbeat


_installed: Beacon | None = None
# The thread that runs the task's loop (the job's thread, or the event loop's thread of an SDK
# runner): its promises replace each other. Other threads (a tool's, a write handed to an
# executor) can only extend the current promise, never cut short the loop's.
_owner: int | None = None


def install(beacon: Beacon | None) -> None:
    """The worker installs its beacon before it forks: the horse inherits it."""
    global _installed
    _installed = beacon


def claim() -> None:
    """The calling thread runs the task's loop from now on (the job's start; an SDK runner's
    event loop thread)."""
    global _owner
    _owner = threading.get_ident()


def expect(layer: str, within_s: float) -> None:
    """The run enters a phase bounded by `within_s` seconds (the layer's timeout): it will be
    heard from again within that plus the grace, or its worker kills it as unresponsive."""
    if _installed is None:
        return
    deadline = time.monotonic() + within_s + settings.HARNESS_HORSE_GRACE_S
    if threading.get_ident() != _owner:
        current = _installed.read()
        if current is not None and current.deadline >= deadline:
            return
    _installed.write(layer, within_s, deadline)


def progress(layer: str = "harness") -> None:
    """The run moved: bookkeeping between bounded phases gets the grace again."""
    expect(layer, 0.0)
