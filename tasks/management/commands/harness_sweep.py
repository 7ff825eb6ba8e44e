"""`manage.py harness_sweep [--loop --interval N]`: one sweep, or one every N seconds.

Placeholder until the sweeper lands: calls `tasks.sweep.sweep_once()` when it exists."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Redispatch stalled tasks, expire reviews, apply retention."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--loop", action="store_true", help="sweep until stopped")
        parser.add_argument("--interval", type=float, default=5.0, help="seconds between sweeps")

    def handle(self, *args, loop: bool, interval: float, **options) -> None:
        try:
            from tasks.sweep import sweep_once
        except ImportError:
            sweep_once = None
        while True:
            if sweep_once is not None:
                sweep_once()
            if not loop:
                return
            time.sleep(interval)
