"""Timing and statistics: samples (interleaved between variants), percentiles, rates, a
benchmark's figures, and the profile of its slowest calls."""

from __future__ import annotations

import cProfile
import math
import pstats
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from bench.common.paths import BENCH_DIR


def timed(fn: Callable[[], Any]) -> float:
    """Seconds one call of `fn` takes (perf_counter)."""
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def sample_interleaved(
    contenders: Mapping[str, Callable[[], Any]], *, n: int, warmup: int = 0
) -> dict[str, list[float]]:
    """`n` timed calls of each contender, round-robin with the order rotated every round, so a
    slow moment of the disk or the scheduler falls on every contender alike."""
    names = list(contenders)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for i in range(warmup + n):
        shift = i % len(names)
        for name in names[shift:] + names[:shift]:
            elapsed = timed(contenders[name])
            if i >= warmup:
                samples[name].append(elapsed)
    return samples


def percentile(values: Iterable[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no samples")
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def stats(values: Iterable[float], *, scale: float = 1.0) -> dict[str, float]:
    """{median, p95, n} of the samples, each multiplied by `scale` (e.g. 1000 for s -> ms)."""
    values = list(values)
    return {
        "median": statistics.median(values) * scale,
        "p95": percentile(values, 95) * scale,
        "n": len(values),
    }


def rate_stats(seconds: Iterable[float], *, count: float) -> dict[str, float]:
    """Throughput ({median, p95, n} of count/second). For a rate, `p95` is the rate of the
    95th-percentile (slow) run, so it is the lower figure."""
    seconds = list(seconds)
    return {
        "median": count / statistics.median(seconds),
        "p95": count / percentile(seconds, 95),
        "n": len(seconds),
    }


def figure(
    *,
    figure: str,
    unit: str,
    ours: Mapping[str, float],
    reference: Mapping[str, float] | None = None,
    reference_label: str = "",
    target: str = "",
    met: bool | None = None,
    note: str = "",
    others: Sequence[tuple[str, Mapping[str, float]]] = (),
    signed: bool = False,
) -> dict[str, Any]:
    """One row of the results table. `ratio` is always ours ÷ reference (medians); whether
    higher or lower is better is said by the target. `others`: more contenders measured in the
    same run, `(label, stats)`, each shown beside the reference with its own ratio. `signed`:
    the figure is the time between two moments of different processes, which may come in
    either order (negative: the second came first)."""
    ratio = None
    if reference is not None and reference.get("median"):
        ratio = ours["median"] / reference["median"]
    return {
        "others": [
            {
                "label": label,
                "stats": dict(value),
                "ratio": ours["median"] / value["median"] if value.get("median") else None,
            }
            for label, value in others
        ],
        "figure": figure,
        "unit": unit,
        "ours": dict(ours),
        "reference": dict(reference) if reference is not None else None,
        "reference_label": reference_label,
        "ratio": ratio,
        "target": target,
        "met": met,
        "note": note,
        "signed": signed,
    }


def profile_top(fn: Callable[[], Any], *, limit: int = 15, repeat: int = 1) -> list[dict]:
    """cProfile `fn` (called `repeat` times): the entries with the most own time, which is
    where a missed target's time goes (socket waits show up as psycopg's wait functions)."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(repeat):
        fn()
    profiler.disable()
    raw = pstats.Stats(profiler).stats  # {(file, line, func): (cc, nc, tottime, cumtime, callers)}
    total = sum(entry[2] for entry in raw.values()) or 1.0
    rows = sorted(raw.items(), key=lambda item: item[1][2], reverse=True)[:limit]
    out = []
    for (path, line, func), (_cc, calls, tottime, cumtime, _callers) in rows:
        where = func if path == "~" else f"{_short_path(path)}:{line}({func})"
        out.append(
            {
                "function": where,
                "calls_per_run": calls / repeat,
                "own_ms_per_run": tottime * 1000 / repeat,
                "cum_ms_per_run": cumtime * 1000 / repeat,
                "own_share": tottime / total,
            }
        )
    return out


def _short_path(path: str) -> str:
    for marker in ("site-packages/", str(BENCH_DIR.parent) + "/", "lib/python"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path
