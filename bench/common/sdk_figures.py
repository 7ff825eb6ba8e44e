"""The figures of the SDK adapter benchmarks (bench.pydantic_ai_adapter, bench.openai_agents):
per tool variant and run length, steps/s against the SDK alone, the overhead per step and the
stored bytes per step, each against the same agent under DBOS's integration when it ran."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from bench.common.measure import figure, rate_stats, stats

OVERHEAD_TARGET = "≤ 3 ms, flat within 10 % from 50 to 200 steps"
STORED_TARGET = "≤ 8 KB, flat within 10 % from 50 to 200 steps"


def overhead(ours: list[float], plain: list[float], steps: int) -> dict[str, float]:
    """(ours − plain) ÷ steps in ms, runs paired by rank."""
    pairs = zip(sorted(ours), sorted(plain), strict=True)
    return stats([max(o - p, 1e-9) / steps for o, p in pairs], scale=1000)


def sdk_figures(
    seconds: Mapping[tuple[str, str, int], list[float]],
    stored: Mapping[tuple[str, str, int], list[float]],
    *,
    steps: Iterable[int],
    variants: Mapping[str, str],
    plain: str,
    dbos: str,
) -> list[dict[str, Any]]:
    """`seconds` and `stored` keyed by (contender: plain, ours, dbos; variant; steps)."""
    figures = []
    for variant, tool in variants.items():
        for n in steps:
            alone = seconds[("plain", variant, n)]
            theirs = seconds.get(("dbos", variant, n))
            figures += [
                figure(
                    figure=f"{tool}: steps/s at {n} steps",
                    unit="steps/s",
                    ours=rate_stats(seconds[("ours", variant, n)], count=n),
                    reference=rate_stats(alone, count=n),
                    reference_label=plain,
                    target="(info) the adapter's cost",
                ),
                figure(
                    figure=f"{tool}: overhead per step at {n} steps",
                    unit="ms",
                    ours=overhead(seconds[("ours", variant, n)], alone, n),
                    reference=overhead(theirs, alone, n) if theirs else None,
                    reference_label=dbos if theirs else "",
                    target=OVERHEAD_TARGET,
                ),
                figure(
                    figure=f"{tool}: stored per step at {n} steps",
                    unit="KB",
                    ours=stats(stored[("ours", variant, n)], scale=1 / 1000),
                    reference=(
                        stats(stored[("dbos", variant, n)], scale=1 / 1000) if theirs else None
                    ),
                    reference_label=dbos if theirs else "",
                    target=STORED_TARGET,
                ),
            ]
    return figures
