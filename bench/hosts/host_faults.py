"""What is done to a host: a partition, a freeze, a kill; its tear-down and its logs."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess

from bench.hosts.namespaces import _quiet, _run, _signal_all


class HostFaults:
    """A host's faults (partition, freeze, kill), its tear-down and its logs."""

    def partition(self) -> None:
        """Cut the host off: its link goes down at the bridge. Nothing is refused; packets
        both ways are dropped, so connections hang (as on a real network split)."""
        _run("ip", "link", "set", self.link, "down")
        self.partitioned = True

    def heal(self) -> None:
        _run("ip", "link", "set", self.link, "up")
        self.partitioned = False

    def freeze(self) -> None:
        """SIGSTOP every process of the host."""
        _signal_all(self.pids(), signal.SIGSTOP)

    def thaw(self) -> None:
        _signal_all(self.pids(), signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL every process of the host but its namespace anchor (the machine dies; its
        disk stays, and processes may be started on it again: a reboot)."""
        anchor = self._anchor.pid if self._anchor else None
        for _ in range(5):  # a process may fork while we kill
            victims = [pid for pid in self.pids() if pid != anchor]
            if not victims:
                break
            _signal_all(victims, signal.SIGKILL)
            _signal_all(victims, signal.SIGCONT)
        for process in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)
        for process in self.workers:  # gone: a pid may come back as another worker's
            self.network._seen.discard(process.pid)
        self.workers.clear()

    def destroy(self) -> None:
        self.kill()
        if self._anchor is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._anchor.pid, signal.SIGKILL)
            self._anchor.wait(timeout=10)
            self._anchor.stdout.close()
            self._anchor = None
        # Deleting the namespace deletes its end of the veth pair, and with it the other end.
        _quiet("ip", "netns", "del", self.netns)
        _quiet("ip", "link", "del", self.link)

    def logs(self, tail: int = 60) -> str:
        parts = []
        for path in sorted(self.log_dir.glob("*.log")):
            lines = path.read_text(errors="replace").splitlines()[-tail:]
            parts.append(f"--- host {self.name}: {path.name}\n" + "\n".join(lines))
        return "\n".join(parts)

    def __repr__(self) -> str:
        return f"<Host {self.name} {self.ip} netns={self.netns}>"
