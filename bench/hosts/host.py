"""One worker machine."""

from __future__ import annotations

from bench.hosts.host_faults import HostFaults
from bench.hosts.host_setup import HostSetup


class Host(HostFaults, HostSetup):
    """One worker machine: a network namespace (`netns`) with one link to the bridge
    (`ip`), a mount namespace with its own disk, a hostname of its own (UTS namespace; worker
    ids are `<hostname>:<pid>`), and the processes started in it.

    `env` is the environment its processes get (the Network's plus this host's: its data
    directory, DATABASE_URL and REDIS_URL as reached from it); change it before starting a
    process, e.g. a per-host clock offset. `wrap` is a command prefix run inside the
    namespaces before Python (e.g. `["faketime", "-f", "+1h"]`)."""
