"""The three-node graph of graphs.py behind a module whose import takes seconds, as a big
operator package's does on a loaded host (tests/durable/test_frozen_horse.py)."""

from __future__ import annotations

import time

time.sleep(3)

from tests.durable.graphs import graph  # noqa: E402 (imported after the slow start, on purpose)

__all__ = ["graph"]
