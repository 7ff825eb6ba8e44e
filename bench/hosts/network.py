"""The network and its hosts (a context manager), and faults held for the length of a block."""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from bench.common import BenchError, wait_for, worker_environment
from bench.hosts.forwarder import Forwarder
from bench.hosts.host import Host
from bench.hosts.network_setup import NetworkSetup


class NetworkHosts:
    """The hosts on the network, the services as they reach them, and their workers."""

    def host(self, name: str, *, env: Mapping[str, str] | None = None) -> Host:
        """A new host (no processes yet): `env` is added to its processes' environment."""
        if any(h.name == name for h in self.hosts):
            raise ValueError(f"host {name!r} exists")
        local = str(self.local)
        host_env = worker_environment(
            database_url=self.reach(self.database_url),
            redis_url=self.reach(self.redis_url),
            **{
                **self.env,
                "HARNESS_DATA_DIR": local,
                "HARNESS_WORKSPACE_ROOT": f"{local}/workspaces",
                "HARNESS_BLOB_DIR": f"{local}/blobs",
                **(env or {}),
            },
        )
        host = Host(self, name=name, index=len(self.hosts), env=host_env)
        self.hosts.append(host)
        host._create()
        return host

    def reach(self, url: str) -> str:
        """`url` as the hosts reach it: a loopback address is replaced by a forwarder on the
        bridge (one per upstream address); any other address is left as it is."""
        parts = urlsplit(url)
        host = parts.hostname or ""
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = host == "localhost"
        if not loopback:
            return url
        default = {"redis": 6379, "rediss": 6379}.get(parts.scheme, 5432)
        upstream = (host, parts.port or default)
        if upstream not in self.forwarders:
            self.forwarders[upstream] = Forwarder(
                listen=(self.gateway, 0), upstream=upstream, rto_max_ms=self.rto_max_ms
            )
        address, port = self.forwarders[upstream].address
        auth, at, _ = parts.netloc.rpartition("@")
        return urlunsplit(parts._replace(netloc=f"{auth}{at}{address}:{port}"))

    def redis(self) -> Any:
        """A Redis client on `redis_url` from here (the root namespace)."""
        import redis

        if self._redis is None:
            self._redis = redis.Redis.from_url(self.redis_url)
        return self._redis

    def wait_workers(self, *, timeout: float = 60.0) -> None:
        """Wait until every worker started on any host has registered with Redis once (fails
        at once, with the host's logs, when one exits before it did; one that exits later, a
        fault injected, does not count)."""
        from rq import Worker

        def registered() -> bool:
            waiting = [
                (host, p) for host in self.hosts for p in host.workers if p.pid not in self._seen
            ]
            for host, process in waiting:
                if process.poll() is not None:
                    raise BenchError(
                        f"rqworker {process.pid} on host {host.name} exited with "
                        f"{process.returncode}:\n{host.logs()}"
                    )
            self._seen.update(w.pid for w in Worker.all(connection=self.redis()))
            return all(p.pid in self._seen for _, p in waiting)

        wait_for(registered, timeout=timeout, interval=0.1, what="the hosts' rqworkers to register")

    def logs(self, tail: int = 60) -> str:
        return "\n".join(host.logs(tail) for host in self.hosts)


class Network(NetworkHosts, NetworkSetup):
    """The bridge, the forwarders to PostgreSQL and Redis, and the hosts (a context manager).

    `database_url` and `redis_url` are the services as this process reaches them; `env` is
    added to every host process's environment (e.g. HARNESS_LEDGER_DIR, fast clocks).
    `run_dir` holds the hosts' disks and logs (a temporary directory, removed on exit, by
    default). `rto_max_ms` caps TCP's retransmission back-off on both ends of every host's
    connections (Linux 6.15+; None: the kernel's, up to 120 s), so that connections a partition
    held up carry on within that long of `heal()` rather than at the next doubled timeout."""


@contextlib.contextmanager
def frozen(host: Host) -> Iterator[Host]:
    """The host frozen for the length of the block (thawed also when it fails)."""
    host.freeze()
    try:
        yield host
    finally:
        host.thaw()


@contextlib.contextmanager
def partitioned(host: Host) -> Iterator[Host]:
    """The host cut off for the length of the block (healed also when it fails)."""
    host.partition()
    try:
        yield host
    finally:
        host.heal()
