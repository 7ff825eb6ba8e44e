"""The chaos suite's own services and the process plumbing they need: a private PostgreSQL
(initdb in a temporary directory, its own port), a private Redis, free ports, process trees."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.chaos.clocks import ChaosError
from bench.common import wait_for


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def poll(predicate: Callable[[], Any], *, timeout: float, what: str, interval: float = 0.05):
    return wait_for(predicate, timeout=timeout, interval=interval, what=what, error=ChaosError)


def parent_pid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def child_pids(pid: int) -> list[int]:
    return [int(p.name) for p in Path("/proc").glob("[0-9]*") if parent_pid(int(p.name)) == pid]


def killpg(pgid: int, sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def tcp_local_ports(pid: int) -> set[int]:
    """The local ports of the process's TCP sockets (its database sessions among them)."""
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[len("socket:[") : -1])
    ports = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/net/{table}") as fh:
            next(fh)
            for line in fh:
                fields = line.split()
                if fields[9] in inodes:
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def pg_bin() -> Path:
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    if not found:
        raise ChaosError("no PostgreSQL server binaries under /usr/lib/postgresql/*/bin")
    return found[-1].parent


class PrivatePostgres:
    """A PostgreSQL cluster of the suite's own (initdb in a temporary directory, its own port),
    which the suite may restart at will. Runs as the `postgres` user when started by root."""

    def __init__(self, root: Path, *, port: int, listen: str = "127.0.0.1") -> None:
        self.dir = root / "pg"
        self.port = port
        self.listen = listen
        self.bin = pg_bin()

    def _run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        command = [str(self.bin / argv[0]), *argv[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, capture_output=True, text=True, check=check, timeout=120)

    def init(self) -> None:
        self.dir.mkdir(parents=True)
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
            os.chmod(self.dir.parent, 0o755)
        self._run("initdb", "-D", str(self.dir), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                  "--no-sync")  # fmt: skip
        with open(self.dir / "postgresql.conf", "a") as conf:
            conf.write(
                f"port = {self.port}\nlisten_addresses = '{self.listen}'\n"
                f"unix_socket_directories = '{self.dir}'\nmax_connections = 300\n"
                "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
                "shared_buffers = 64MB\n"
            )
        with open(self.dir / "pg_hba.conf", "a") as hba:
            hba.write("host all all 0.0.0.0/0 trust\n")

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.dir), "-l", str(self.dir / "log"), "-w", "start")

    def restart(self) -> None:
        """A fast shutdown (every session cut) and a start."""
        self._run("pg_ctl", "-D", str(self.dir), "-m", "fast", "-w", "restart",
                  "-l", str(self.dir / "log"))  # fmt: skip

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.dir), "-m", "immediate", "-w", "stop", check=False)

    def url(self, host: str = "127.0.0.1") -> str:
        return f"postgres://postgres@{host}:{self.port}/chaos"

    def create_database(self) -> None:
        import psycopg

        with psycopg.connect(
            host="127.0.0.1", port=self.port, user="postgres", dbname="postgres", autocommit=True
        ) as conn:
            conn.execute("CREATE DATABASE chaos")


class PrivateRedis:
    """A Redis of the suite's own, with an append-only file: a restart keeps the queues (as a
    production Redis would), a FLUSHALL does not."""

    def __init__(self, root: Path, *, port: int, bind: str = "127.0.0.1") -> None:
        self.dir = root / "redis"
        self.dir.mkdir(parents=True)
        self.port = port
        self.bind = bind
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise ChaosError("redis-server is not installed")
        with open(self.dir / "log", "ab") as log:
            self.process = subprocess.Popen(
                [
                    binary,
                    "--port",
                    str(self.port),
                    "--bind",
                    self.bind,
                    "--save",
                    "",
                    "--appendonly",
                    "yes",
                    "--appendfsync",
                    "everysec",
                    "--dir",
                    str(self.dir),
                    "--protected-mode",
                    "no",
                ],  # fmt: skip
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        poll(self.ping, timeout=20, what="the private Redis to answer")

    def ping(self) -> bool:
        import redis

        try:
            return bool(redis.Redis(port=self.port, socket_timeout=1).ping())
        except redis.RedisError:
            return False

    def restart(self) -> None:
        """SIGTERM (Redis writes its append-only file and exits), then a new server."""
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)
        self.start()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    def url(self, host: str = "127.0.0.1") -> str:
        return f"redis://{host}:{self.port}/0"
