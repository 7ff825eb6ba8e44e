"""Worker "hosts" on this machine: each in a network namespace and a mount namespace of its own,
so that a test or a benchmark runs workers the way a deployment on several machines does.

What a host shares with the others is only what the product shares by design: PostgreSQL,
Redis (both reached over the network) and the external test-tool ledger (HARNESS_LEDGER_DIR,
which models the outside world). Its data directory (HARNESS_DATA_DIR, the workspaces under
it) is its own disk: every host sees its disk at the same path (`Network.local`, like machines
configured alike), and the other hosts' disks are hidden under an empty tmpfs in its mount
namespace. From here (the root namespace) a host's disk is `host.disk`.

The network: a bridge in the root namespace (`10.231.N.1/24`, N free on this machine), one
veth pair per host (`10.231.N.11`, `.12`, ...). PostgreSQL and Redis of a test listen on
loopback only; `Network.reach(url)` gives the URL a host uses for them: through a small TCP
forwarder listening on the bridge address (a thread per connection direction), or the URL
itself when it does not name loopback (a private server listening on `Network.gateway`).

Faults, as an operator sees them on real machines:
- `partition()` / `heal()`: the host's link goes down (the root end of its veth pair), then up.
  Packets are dropped, nothing is refused: connections hang and retransmit, new ones hang on
  their SYN; after `heal()` they carry on where they were.
- `freeze()` / `thaw()`: SIGSTOP / SIGCONT every process in the host (a VM paused, a host
  swapping itself to death).
- `kill()`: SIGKILL every process in the host (the machine dies; its disk stays).

Names are unique per `Network` (a random suffix), so parallel test processes do not collide;
`Network.__exit__` (and, should the block be skipped, an `atexit` hook) kills every process of
every host and removes the namespaces, links and bridge, also when the block fails. What a
process killed outright left behind is removed by the next Network made on the machine.

Needs root (`ip netns`, `mount`); `unavailable()` says why not, for a skip. No iptables or nft.

    with Network(database_url=db, redis_url=redis, env=common_env, run_dir=tmp) as net:
        a, b = net.host("a"), net.host("b")
        a.start_worker(2)
        b.start_sweeper()
        a.partition()
        ...
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import ipaddress
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from bench.common import QUEUES, REPO_ROOT, BenchError, spawn, wait_for, worker_environment

# Subnets 10.231.N.0/24: N is picked at random among those no interface of this machine uses,
# under a lock, so two Networks (two test processes) never share one.
SUBNET_PREFIX = "10.231"
FIRST_HOST = 11
_LOCK = Path(tempfile.gettempdir()) / "harness-hosts.lock"
# One file per open Network, named by its suffix, holding the pid of the process that made it.
_OWNERS = Path(tempfile.gettempdir()) / "harness-hosts"
TCP_RTO_MAX_MS = 44  # linux/tcp.h (6.15): a socket's cap on its retransmission back-off


def unavailable() -> str:
    """Why hosts cannot be made here ("" when they can): for a test's skip reason."""
    if os.geteuid() != 0:
        return "worker hosts need root (network and mount namespaces: ip netns, mount)"
    for program in ("ip", "nsenter", "unshare", "mount"):
        if shutil.which(program) is None:
            return f"worker hosts need `{program}` (iproute2 / util-linux)"
    return ""


def _run(*args: str) -> str:
    done = subprocess.run(args, capture_output=True, text=True, timeout=30)
    if done.returncode:
        raise BenchError(f"`{' '.join(args)}` failed: {done.stderr.strip()}")
    return done.stdout


def _quiet(*args: str) -> None:
    """Tear-down: the thing may already be gone."""
    subprocess.run(args, capture_output=True, timeout=30)


def _signal_all(pids: Sequence[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _remove_leftovers() -> None:
    """Remove what Networks whose process died without closing them (SIGKILL, a CI job's
    timeout) left behind: their hosts' processes, namespaces, links and bridge. Under _LOCK."""
    _OWNERS.mkdir(exist_ok=True)
    for owner in _OWNERS.iterdir():
        pid = owner.read_text().strip()
        if pid.isdigit() and Path(f"/proc/{pid}").exists():
            continue
        suffix = owner.name
        for line in _run("ip", "netns", "list").splitlines():
            netns = line.split(" ", 1)[0]
            if netns.startswith(f"hn{suffix}"):
                pids = _run("ip", "netns", "pids", netns).split()
                _signal_all([int(p) for p in pids], signal.SIGKILL)
                _quiet("ip", "netns", "del", netns)
        for line in _run("ip", "-o", "link", "show").splitlines():
            link = line.split(":")[1].strip().split("@")[0]
            if link.startswith((f"hv{suffix}", f"hb{suffix}")):
                _quiet("ip", "link", "del", link)
        owner.unlink(missing_ok=True)


# --- TCP forwarding ---------------------------------------------------------------------------


class Forwarder:
    """Accepts TCP connections on `listen` and relays each, both ways, to `upstream`.

    One thread per direction of each connection: blocking `recv`/`sendall` release the
    interpreter lock, and a connection whose far end is partitioned simply blocks (no timeouts
    here: the hosts' own TCP stacks and clients decide when to give up, as on a real network).
    """

    def __init__(
        self, *, listen: tuple[str, int], upstream: tuple[str, int], rto_max_ms: int | None = None
    ) -> None:
        self.upstream = upstream
        self.rto_max_ms = rto_max_ms
        self.server = socket.create_server(listen, reuse_port=False)
        self.address: tuple[str, int] = self.server.getsockname()[:2]
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, name=f"forward-{self.address}", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return  # closed
            try:
                upstream = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.rto_max_ms:
                with contextlib.suppress(OSError):  # before Linux 6.15
                    client.setsockopt(socket.IPPROTO_TCP, TCP_RTO_MAX_MS, self.rto_max_ms)
            with self._lock:
                if self._closed:
                    client.close()
                    upstream.close()
                    return
                self._open.update((client, upstream))
            pair = [client, upstream]
            remaining = [2]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(
                    target=self._pump, args=(src, dst, pair, remaining), daemon=True
                ).start()

    def _pump(
        self, src: socket.socket, dst: socket.socket, pair: list[socket.socket], remaining: list
    ) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
            dst.shutdown(socket.SHUT_WR)  # pass the end of the stream on
        except OSError:
            for sock in pair:  # one side broke: the whole connection does
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        with self._lock:
            remaining[0] -= 1
            if remaining[0]:
                return
            for sock in pair:
                self._open.discard(sock)
                sock.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            sockets = list(self._open)
        # shutdown() wakes the threads blocked in accept() and recv().
        for sock in [self.server, *sockets]:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self.server.close()


# --- hosts ------------------------------------------------------------------------------------


class Host:
    """One worker machine: a network namespace (`netns`) with one link to the bridge
    (`ip`), a mount namespace with its own disk, a hostname of its own (UTS namespace; worker
    ids are `<hostname>:<pid>`), and the processes started in it.

    `env` is the environment its processes get (the Network's plus this host's: its data
    directory, DATABASE_URL and REDIS_URL as reached from it); change it before starting a
    process, e.g. a per-host clock offset. `wrap` is a command prefix run inside the
    namespaces before Python (e.g. `["faketime", "-f", "+1h"]`)."""

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

    # -- set-up (Network.host) --

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

    # -- processes --

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
                ["rqworker", *QUEUES, "--with-scheduler"],
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

    # -- faults --

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

    # -- tear-down and diagnostics --

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


# --- the network ------------------------------------------------------------------------------


class Network:
    """The bridge, the forwarders to PostgreSQL and Redis, and the hosts (a context manager).

    `database_url` and `redis_url` are the services as this process reaches them; `env` is
    added to every host process's environment (e.g. HARNESS_LEDGER_DIR, fast clocks).
    `run_dir` holds the hosts' disks and logs (a temporary directory, removed on exit, by
    default). `rto_max_ms` caps TCP's retransmission back-off on both ends of every host's
    connections (Linux 6.15+; None: the kernel's, up to 120 s), so that connections a partition
    held up carry on within that long of `heal()` rather than at the next doubled timeout."""

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

    # -- set-up and tear-down --

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

    # -- hosts --

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

    # -- services --

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
