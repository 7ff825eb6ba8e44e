"""The process supervisor of `harness up`: its children each in their own process group, their
output prefixed with their name, a child that dies restarted with backoff (harness_site.cli.
restarts), its state published for /ops/, and stopping exactly those groups (Redis last)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from harness_site.cli.common import ROOT, say
from harness_site.cli.restarts import RestartHistory, RestartPolicy, exit_described, status_write


@dataclass
class Child:
    name: str
    argv: list[str]
    env: dict[str, str]
    process: subprocess.Popen[bytes]
    history: RestartHistory
    # Redis stops last: workers finishing a job still talk to it.
    stop_last: bool = False
    # The web server and the embedded Redis: given up on, they stop everything.
    critical: bool = False
    # running | restarting (waiting out its backoff) | down (given up) | stopped
    state: str = "running"
    restart_at: float = 0.0
    restarts: int = 0
    last_exit: str = ""
    started_at: float = field(default_factory=time.time)
    pump: threading.Thread | None = field(default=None, repr=False)


def _pump(prefix: str, stream: IO[bytes]) -> None:
    out = sys.stdout.buffer
    for line in iter(stream.readline, b""):
        try:
            out.write(prefix.encode() + line)
            out.flush()
        except (BrokenPipeError, ValueError):
            pass
    stream.close()


def _signal_group(child: Child, sig: int) -> None:
    try:
        os.killpg(child.process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _process_start(argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A child's process, in a new session, its output (both streams) on one pipe."""
    return subprocess.Popen(
        argv,
        cwd=ROOT,
        env=env,
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def _exit_wait(process: subprocess.Popen[bytes], wake: threading.Event) -> None:
    process.wait()
    wake.set()


def _child_watch(child: Child, *, wake: threading.Event) -> None:
    """`child`'s process just started: its output pumped with its name, `wake` set the moment
    it exits (the supervising loop acts at once instead of at its next poll)."""
    child.state, child.started_at = "running", time.time()
    child.pump = threading.Thread(
        target=_pump, args=(f"{child.name:<9}| ", child.process.stdout), daemon=True
    )
    child.pump.start()
    threading.Thread(target=_exit_wait, args=(child.process, wake), daemon=True).start()


def child_spawn(child: Child, *, wake: threading.Event) -> None:
    """Start (or restart) `child` in a new session, watched (_child_watch)."""
    child.process = _process_start(child.argv, child.env)
    _child_watch(child, wake=wake)


def child_status(child: Child) -> dict[str, Any]:
    """One child as the status record has it (dashboard.supervised reads it)."""
    return {
        "name": child.name,
        "pid": child.process.pid,
        "state": child.state,
        "restarts": child.restarts,
        "last_exit": child.last_exit,
        "since": child.started_at,
    }


def children_stop(children: list[Child], *, grace: float, hurried: Callable[[], bool]) -> None:
    """SIGTERM to each child's process group; SIGKILL to what is left after `grace` (or at
    once when `hurried()`: a second Ctrl-C)."""
    alive = [c for c in children if c.process.poll() is None]
    for child in alive:
        _signal_group(child, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while any(c.process.poll() is None for c in alive):
        if hurried() or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    for child in children:
        # Also reaches grandchildren (rq's scheduler) whose leader already exited.
        _signal_group(child, signal.SIGKILL)
        try:
            child.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            say(f"{child.name} (pid {child.process.pid}) did not exit after SIGKILL")
        if child.pump is not None:
            child.pump.join(timeout=2)
        child.state = "stopped"


class Supervisor:
    """Starts children each in a new session (its own process group) so a terminal's Ctrl-C
    reaches only this process, which then stops the groups it started — and nothing else.
    A child that exits on its own is restarted with backoff; one that keeps crashing is given
    up on, and only a critical one (web, embedded Redis) given up on stops everything."""

    def __init__(
        self,
        *,
        policy: RestartPolicy | None = None,
        status_path: Path | None = None,
        stop_grace_s: float = 10.0,
    ) -> None:
        self.children: list[Child] = []
        self.stop_signal: int | None = None
        self.policy = policy or RestartPolicy()
        self.status_path = status_path
        self.stop_grace_s = stop_grace_s
        self._hurry = False
        self._wake = threading.Event()

    def start(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: dict[str, str],
        stop_last: bool = False,
        critical: bool = False,
    ) -> Child:
        child = Child(
            name=name,
            argv=list(argv),
            env=env,
            process=_process_start(list(argv), env),
            history=RestartHistory(self.policy),
            stop_last=stop_last,
            critical=critical,
        )
        _child_watch(child, wake=self._wake)
        self.children.append(child)
        self.status_publish()
        return child

    def install_signal_handlers(self) -> None:
        def handler(signum: int, frame: object) -> None:
            if self.stop_signal is not None:
                # A second Ctrl-C: stop waiting for graceful shutdowns.
                self._hurry = True
            self.stop_signal = signum
            self._wake.set()

        signal.signal(signal.SIGINT, handler)
        signal.signal(signal.SIGTERM, handler)

    def dead_child(self) -> Child | None:
        """A critical child (web, embedded Redis) that exited: while `harness up` starts, a
        failure to start. Others are restarted once supervising begins."""
        for child in self.children:
            if child.critical and child.state == "running" and child.process.poll() is not None:
                return child
        return None

    def _on_death(self, child: Child, now: float) -> bool:
        """Restart `child` after its backoff, or give up on it. -> False: a critical child was
        given up on, and everything stops."""
        child.last_exit = f"pid {child.process.pid} {exit_described(child.process.returncode)}"
        # What it left in its process group (rq's scheduler) goes with it; its work horse, in
        # a group of its own, dies by its parent-death signal (agent.worker).
        _signal_group(child, signal.SIGKILL)
        if child.history.exhausted(now):
            child.state = "down"
            policy = self.policy
            say(
                f"{child.name} ({child.last_exit}) crashed again after {policy.max_restarts} "
                f"restarts within {policy.window_s:g}s; giving up on it"
                + ("; stopping everything" if child.critical else "; the rest keeps running")
            )
            return not child.critical
        delay = child.history.next_backoff_s(now)
        child.state, child.restart_at = "restarting", now + delay
        say(f"{child.name} ({child.last_exit}) exited unexpectedly; restarting it in {delay:g}s")
        return True

    def _restart(self, child: Child, now: float) -> None:
        child.history.record(now)
        child.restarts += 1
        child_spawn(child, wake=self._wake)
        say(f"{child.name} restarted (pid {child.process.pid}, restart {child.restarts})")

    def supervise(self) -> int:
        """Heal children until a stop signal (exit 0) or a critical child is given up on
        (exit 1)."""
        while self.stop_signal is None:
            self._wake.clear()
            now = time.monotonic()
            changed = False
            for child in self.children:
                if child.state == "running" and child.process.poll() is not None:
                    changed = True
                    if not self._on_death(child, now):
                        self.status_publish()
                        self.stop_all()
                        return 1
                elif child.state == "restarting" and now >= child.restart_at:
                    changed = True
                    self._restart(child, now)
            if changed:
                self.status_publish()
            waits = [c.restart_at - now for c in self.children if c.state == "restarting"]
            self._wake.wait(max(0.0, min([1.0, *waits])))
        say(f"received {signal.Signals(self.stop_signal).name}; stopping")
        self.stop_all()
        return 0

    def status_publish(self) -> None:
        if self.status_path is None:
            return
        processes = [child_status(child) for child in self.children]
        try:
            status_write(self.status_path, processes=processes)
        except OSError as exc:  # the record is for the page; supervising goes on without it
            say(f"could not write {self.status_path}: {exc}")

    def stop_all(self) -> None:
        """SIGTERM to each child (a busy worker drains: HARNESS_DRAIN_S), SIGKILL after the
        grace; Redis last. The status record goes: nothing is supervised any more."""
        first = [c for c in reversed(self.children) if not c.stop_last]
        for group in (first, [c for c in self.children if c.stop_last]):
            children_stop(group, grace=self.stop_grace_s, hurried=lambda: self._hurry)
        if self.status_path is not None:
            self.status_path.unlink(missing_ok=True)
