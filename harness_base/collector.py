"""The garbage collector while a task runs (`collector_for_run`): its young generation's
threshold raised for the run, the thresholds as they were after it.

A run keeps a growing working set alive from start to end — the agent's message history and
its stored form, the ledger's rows, the checkpoint chain's bookkeeping — and makes many
short-lived objects per step (rows, events, statements). With Python's default thresholds
(700, 10, 10) a full collection comes every 70,000 net allocations and traverses that whole
working set, so its cost per step grows with the run: about 1 ms a step at 200 steps of a
Pydantic AI agent (bench/pydantic_ai_adapter.py). Collecting the young generation every
10,000 allocations instead makes every generation's collections 14 times rarer; what they
reclaim is the same, a little later (a young generation of 10,000 objects is a few MB at most).
The work horse that runs the task is its own process, so nothing else shares the setting;
a run in the worker's own process (tests, benchmarks) gets the thresholds back after it."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

RUN_YOUNG_THRESHOLD = 10_000


@contextmanager
def collector_for_run() -> Iterator[None]:
    """The collector's thresholds for a run (see the module); restored however it ends."""
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], RUN_YOUNG_THRESHOLD), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
