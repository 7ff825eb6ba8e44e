"""The process supervisor of `harness up`: its children each in their own process group, their
output prefixed with their name, and stopping exactly those groups (Redis last)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO

from harness_site.cli.common import ROOT, say


@dataclass
class Child:
    name: str
    process: subprocess.Popen
    # Redis stops last: workers finishing a job still talk to it.
    stop_last: bool = False
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


class Supervisor:
    """Starts children each in a new session (its own process group) so a terminal's Ctrl-C
    reaches only this process, which then stops the groups it started — and nothing else."""

    def __init__(self) -> None:
        self.children: list[Child] = []
        self.stop_signal: int | None = None
        self._hurry = False
        self._wake = threading.Event()

    def start(
        self, name: str, argv: Sequence[str], *, env: dict[str, str], stop_last: bool = False
    ) -> Child:
        process = subprocess.Popen(
            list(argv),
            cwd=ROOT,
            env=env,
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        child = Child(name=name, process=process, stop_last=stop_last)
        child.pump = threading.Thread(
            target=_pump, args=(f"{name:<9}| ", process.stdout), daemon=True
        )
        child.pump.start()
        self.children.append(child)
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
        for child in self.children:
            if child.process.poll() is not None:
                return child
        return None

    def supervise(self) -> int:
        """Block until a stop signal (exit 0) or a child's unexpected exit (exit 1)."""
        while self.stop_signal is None:
            dead = self.dead_child()
            if dead is not None:
                say(
                    f"{dead.name} (pid {dead.process.pid}) exited unexpectedly with code "
                    f"{dead.process.returncode}; stopping everything"
                )
                self.stop_all()
                return 1
            self._wake.wait(0.5)
        say(f"received {signal.Signals(self.stop_signal).name}; stopping")
        self.stop_all()
        return 0

    def _stop(self, children: list[Child], *, grace: float) -> None:
        alive = [c for c in children if c.process.poll() is None]
        for child in alive:
            _signal_group(child, signal.SIGTERM)
        half = time.monotonic() + grace / 2
        deadline = time.monotonic() + grace
        resent = False
        while any(c.process.poll() is None for c in alive):
            if self._hurry or time.monotonic() >= deadline:
                break
            if not resent and time.monotonic() >= half:
                # rq: the second SIGTERM turns a warm shutdown (finish the job) into a cold
                # one; the task's checkpoints let another worker continue it later.
                for child in alive:
                    if child.process.poll() is None:
                        _signal_group(child, signal.SIGTERM)
                resent = True
            time.sleep(0.1)
        for child in children:
            # Also reaches grandchildren (rq's work horse) whose leader already exited.
            _signal_group(child, signal.SIGKILL)
            try:
                child.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                say(f"{child.name} (pid {child.process.pid}) did not exit after SIGKILL")
            if child.pump is not None:
                child.pump.join(timeout=2)

    def stop_all(self) -> None:
        self._stop([c for c in reversed(self.children) if not c.stop_last], grace=10)
        self._stop([c for c in self.children if c.stop_last], grace=10)
