"""The network made and removed: the bridge, the forwarders to PostgreSQL and Redis."""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import random
import shutil
import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.common import BenchError
from bench.hosts.forwarder import Forwarder
from bench.hosts.host import Host
from bench.hosts.namespaces import (
    _LOCK,
    _OWNERS,
    SUBNET_PREFIX,
    _quiet,
    _remove_leftovers,
    _run,
    unavailable,
)

if TYPE_CHECKING:
    from bench.hosts.network import Network


class NetworkSetup:
    """The bridge and the forwarders made on entry and removed on exit."""

    def __init__(
        self,
        *,
        database_url: str,
        redis_url: str,
        env: Mapping[str, str] | None = None,
        run_dir: Path | None = None,
        rto_max_ms: int | None = 1000,
    ) -> None:
        reason = unavailable()
        if reason:
            raise BenchError(reason)
        self.database_url = database_url
        self.redis_url = redis_url
        self.env = dict(env or {})
        self.suffix = uuid.uuid4().hex[:6]
        self.bridge = f"hb{self.suffix}"
        # Fixed (a bridge otherwise takes its lowest port's address, which the hosts' static
        # neighbour entries would miss); locally administered.
        self.bridge_mac = "02:48:" + ":".join(self.suffix[i : i + 2] for i in (0, 2, 4)) + ":01"
        self.rto_max_ms = rto_max_ms
        self._own_run_dir = run_dir is None
        self.run_dir = Path(run_dir or tempfile.mkdtemp(prefix="harness-hosts-")) / self.suffix
        self.local = self.run_dir / "local"  # where each host sees its own disk
        self.subnet = ""
        self.gateway = ""
        self.hosts: list[Host] = []
        self.forwarders: dict[tuple[str, int], Forwarder] = {}
        self._redis: Any = None
        self._seen: set[int] = set()  # pids of workers seen registered
        self._up = False

    def __enter__(self) -> Network:
        atexit.register(self.close)
        try:
            self._create()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _create(self) -> None:
        self._up = True
        self.local.mkdir(parents=True)
        (self.run_dir / "disk").mkdir()
        with open(_LOCK, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            _remove_leftovers()
            (_OWNERS / self.suffix).write_text(str(os.getpid()))
            used = _run("ip", "-o", "-4", "addr", "show")
            free = [n for n in range(1, 255) if f" {SUBNET_PREFIX}.{n}." not in used]
            if not free:
                raise BenchError(f"no free subnet {SUBNET_PREFIX}.N.0/24 on this machine")
            self.subnet = f"{SUBNET_PREFIX}.{random.choice(free)}"
            self.gateway = f"{self.subnet}.1"
            _run("ip", "link", "add", self.bridge, "address", self.bridge_mac, "type", "bridge")
            _run("ip", "addr", "add", f"{self.gateway}/24", "dev", self.bridge)
            _run("ip", "link", "set", self.bridge, "up")

    def close(self) -> None:
        """Kill every host's processes, remove namespaces, links, bridge and forwarders (and
        the run directory when it was ours). Safe to call twice."""
        atexit.unregister(self.close)
        if not self._up:
            return
        self._up = False
        for host in self.hosts:
            with contextlib.suppress(Exception):
                host.destroy()
        for forwarder in self.forwarders.values():
            forwarder.close()
        _quiet("ip", "link", "del", self.bridge)
        (_OWNERS / self.suffix).unlink(missing_ok=True)
        if self._redis is not None:
            self._redis.close()
        if self._own_run_dir:
            shutil.rmtree(self.run_dir.parent, ignore_errors=True)
