"""A host made: its namespaces, disk, link and hostname, and the processes started in it."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bench.common import REPO_ROOT, BenchError, spawn
from bench.hosts.namespaces import FIRST_HOST, _run
from harness_base.queues import WORKER_QUEUES

if TYPE_CHECKING:
    from bench.hosts.network import Network


class HostSetup:
    """A host's namespaces, disk and link made (Network.host), and the processes started in it."""

    def __init__(self, network: Network, *, name: str, index: int, env: dict[str, str]) -> None:
        self.network = network
        self.name = name
        self.index = index
        self.netns = f"hn{network.suffix}{index}"
        self.link = f"hv{network.suffix}{index}"  # the root end of the veth pair
        self.ip = f"{network.subnet}.{FIRST_HOST + index}"
        self.hostname = f"{name}-{network.suffix}"  # worker ids start with it
        self.disk = network.run_dir / "disk" / name
        self.log_dir = network.run_dir / "logs" / name
        self.env = env
        self.wrap: list[str] = []
        self.processes: list[subprocess.Popen] = []
        self.workers: list[subprocess.Popen] = []
        self.partitioned = False
        self._anchor: subprocess.Popen | None = None

    def _create(self) -> None:
        peer = f"hp{self.network.suffix}{self.index}"
        self.disk.mkdir(parents=True)
        self.log_dir.mkdir(parents=True)
        _run("ip", "netns", "add", self.netns)
        _run("ip", "link", "add", self.link, "type", "veth", "peer", "name", peer)
        _run("ip", "link", "set", peer, "netns", self.netns)
        _run("ip", "-n", self.netns, "link", "set", peer, "name", "eth0")
        _run("ip", "-n", self.netns, "addr", "add", f"{self.ip}/24", "dev", "eth0")
        _run("ip", "-n", self.netns, "link", "set", "eth0", "up")
        _run("ip", "-n", self.netns, "link", "set", "lo", "up")
        _run("ip", "link", "set", self.link, "master", self.network.bridge)
        _run("ip", "link", "set", self.link, "up")
        # Static neighbours both ways: a partition drops packets, it does not make address
        # resolution fail (which would refuse new connections with EHOSTUNREACH at once).
        mac = _run("ip", "-n", self.netns, "-br", "link", "show", "eth0").split()[2]
        _run("ip", "-n", self.netns, "neigh", "replace", self.network.gateway,
             "lladdr", self.network.bridge_mac, "dev", "eth0", "nud", "permanent")  # fmt: skip
        _run("ip", "neigh", "replace", self.ip, "lladdr", mac, "dev", self.network.bridge,
             "nud", "permanent")  # fmt: skip
        if self.network.rto_max_ms and Path("/proc/sys/net/ipv4/tcp_rto_max_ms").exists():
            _run("ip", "netns", "exec", self.netns, "sysctl", "-q", "-w",
                 f"net.ipv4.tcp_rto_max_ms={self.network.rto_max_ms}")  # fmt: skip
        # The anchor holds the host's mount namespace (its own disk at the shared local path,
        # every host's disk hidden) and its hostname (worker ids name it). Every process of the
        # host joins them and the netns.
        local, disks = self.network.local, self.network.run_dir / "disk"
        self._anchor = subprocess.Popen(
            [
                "ip", "netns", "exec", self.netns,
                "unshare", "--mount", "--uts", "--propagation", "private", "--",
                "sh", "-c",
                f'hostname "{self.hostname}" && mount --bind "{self.disk}" "{local}" && '
                f'mount -t tmpfs -o size=64k,mode=0700 harness-host "{disks}" && '
                "echo ready && exec sleep infinity",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        line = self._anchor.stdout.readline().decode().strip()
        if line != "ready":
            raise BenchError(f"host {self.name}: mount namespace failed: {line}")

    def command(self, argv: Sequence[str]) -> list[str]:
        """`argv` as a command line that runs it on this host (its namespaces, `wrap`)."""
        return [
            "nsenter",
            f"--target={self._anchor.pid}",
            "--net",
            "--mount",
            "--uts",
            f"--wd={REPO_ROOT}",
            "--",
            *self.wrap,
            *argv,
        ]

    def spawn(self, command: list[str], *, log_name: str, module: str = "") -> subprocess.Popen:
        """`manage.py <command>` (or `python -m <module> <command>`) on this host, in a
        process group of its own, logging to log_dir/<log_name>.log."""
        process = spawn(
            command,
            log=self.log_dir / f"{log_name}.log",
            env=self.env,
            module=module,
            prefix=self.command([]),
        )
        self.processes.append(process)
        return process

    def start_worker(
        self, count: int = 1, *, wait: bool = True, timeout: float = 60.0
    ) -> list[subprocess.Popen]:
        """Start `count` real `manage.py rqworker high default low --with-scheduler` processes
        on this host and (unless `wait` is false: `Network.wait_workers`) wait until each has
        registered with Redis."""
        started = [
            self.spawn(
                ["rqworker", *WORKER_QUEUES, "--with-scheduler"],
                log_name=f"worker-{len(self.processes) + 1}",
            )
            for _ in range(count)
        ]
        self.workers.extend(started)
        if wait:
            self.network.wait_workers(timeout=timeout)
        return started

    def start_sweeper(self) -> subprocess.Popen:
        """`manage.py harness_sweep --loop` on this host."""
        log_name = f"sweeper-{len(self.processes) + 1}"
        return self.spawn(["harness_sweep", "--loop"], log_name=log_name)

    def pids(self) -> list[int]:
        """Every process in the host's network namespace (its workers, their work horses and
        schedulers, the namespace anchor), live or stopped."""
        out = subprocess.run(
            ["ip", "netns", "pids", self.netns], capture_output=True, text=True, timeout=30
        ).stdout
        return [int(pid) for pid in out.split()]
