"""`manage.py harness_sweep [--loop] [--interval N]`: one sweep, or one every N seconds.

Run it continuously in production (one or more, anywhere that reaches the database and Redis):
stalled tasks are redispatched, tasks whose RQ job vanished are re-enqueued, overdue reviews
expire. Several sweepers at once are safe."""

from __future__ import annotations

import logging
import signal
import threading
from dataclasses import asdict

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import close_old_connections

from agent.sweep import sweep_once

log = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Redispatch stalled tasks, re-enqueue tasks whose job is gone, expire reviews."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--loop", action="store_true", help="sweep until stopped")
        parser.add_argument(
            "--interval",
            type=float,
            default=None,
            help="seconds between sweeps with --loop (default: HARNESS_SWEEP_INTERVAL_S)",
        )

    def handle(self, *args, loop: bool, interval: float | None, **options) -> None:
        if not loop:
            self.stdout.write(str(asdict(sweep_once())))
            return
        interval = interval if interval is not None else settings.HARNESS_SWEEP_INTERVAL_S
        stopping = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stopping.set())
        while not stopping.is_set():
            try:
                sweep_once()
            except Exception:  # a database or Redis outage: log it, try again next round
                log.exception("sweep failed; retrying in %ss", interval)
            finally:
                close_old_connections()
            stopping.wait(interval)
