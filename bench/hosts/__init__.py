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

from bench.hosts.forwarder import Forwarder
from bench.hosts.host import Host
from bench.hosts.namespaces import unavailable
from bench.hosts.network import Network, frozen, partitioned

__all__ = [
    "Forwarder",
    "Host",
    "Network",
    "frozen",
    "partitioned",
    "unavailable",
]
