"""Sampling both sides, alternated per repetition so a busy moment hits both."""

from __future__ import annotations

from typing import Any

from bench.common import (
    profile_top,
    reference_schema_reset,
)
from bench.common.dbos_ref import dbos_stop
from bench.loop.dbos_agent import DbosAgent
from bench.loop.langgraph_agent import LangGraphAgent
from bench.loop.ours import (
    VARIANTS,
    ours_checkpoint_growth,
    ours_cleanup,
    ours_prepare,
    ours_retention,
    ours_run,
    ours_samples,
)


def _measure(small: int, large: int, repeat: int) -> tuple[Any, ...]:
    """Samples of ours, LangGraph (async and sync durability) and DBOS per variant and size,
    alternated per repetition; then ours profiled, its checkpoint growth and retention:
    -> (seconds, stored, profiles, growth, retention)."""
    reference_schema_reset()
    langgraph = LangGraphAgent()
    dbos = DbosAgent()
    seconds: dict[tuple[str, str, int], list[float]] = {}
    stored: dict[tuple[str, str, int], list[float]] = {}
    try:
        for variant in VARIANTS:
            # Warm both paths up (imports, prepared plans) before measuring.
            ours_samples(3, 1, variant)
            langgraph.samples(3, 1, variant, durability="async")
            dbos.samples(3, 1, variant)
        # Alternate ours / LangGraph per repetition so a busy moment hits both.
        for _ in range(repeat):
            for variant in VARIANTS:
                for steps in (small, large):
                    for who, sampler in (
                        ("ours", lambda s=steps, v=variant: ours_samples(s, 1, v)),
                        (
                            "langgraph",
                            lambda s=steps, v=variant: langgraph.samples(
                                s, 1, v, durability="async"
                            ),
                        ),
                        (
                            "langgraph_sync",
                            lambda s=steps, v=variant: langgraph.samples(
                                s, 1, v, durability="sync"
                            ),
                        ),
                        ("dbos", lambda s=steps, v=variant: dbos.samples(s, 1, v)),
                    ):
                        t, b = sampler()
                        seconds.setdefault((who, variant, steps), []).extend(t)
                        stored.setdefault((who, variant, steps), []).extend(b)
        profiles, growth = {}, {}
        for variant in VARIANTS:
            task = ours_prepare(large, variant)
            profiles[f"ours: one task_run of {large} {variant} steps"] = profile_top(
                lambda task=task: ours_run(task)
            )
            growth[variant] = ours_checkpoint_growth(task.id)
            ours_cleanup(task)
        retention = ours_retention(large)
    finally:
        langgraph.close()
        dbos.close()
        dbos_stop()
        reference_schema_reset(drop_only=True)
    return seconds, stored, profiles, growth, retention
