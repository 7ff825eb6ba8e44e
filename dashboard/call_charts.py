"""Figure data for the statistics page's per-call charts: the failure rate per step index
(binned so each bar stands on enough calls) and the retries distribution."""

from __future__ import annotations

import math
from typing import Any

from dashboard.charts import figure, layout, pct, pct_axis, rate_bars

# Beyond this many step indices, neighbouring steps share a bar.
MAX_STEP_BARS = 20
# A bar standing on fewer calls than this is drawn faint: one failed call of one is no rate.
FEW_CALLS = 5


def _step_bins(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows per step index, or per range of them ("10–19") when there are many."""
    if not rows:
        return []
    top = max(row["step_index"] for row in rows)
    width = math.ceil((top + 1) / MAX_STEP_BARS)
    if width == 1:
        return [{**row, "label": str(row["step_index"])} for row in rows]
    bins: dict[int, dict[str, Any]] = {}
    for row in rows:
        lo = row["step_index"] // width * width
        into = bins.setdefault(lo, {"calls": 0, "failed": 0, "label": f"{lo}–{lo + width - 1}"})
        into["calls"] += row["calls"]
        into["failed"] += row["failed"]
    return [
        {**b, "rate": round(b["failed"] / b["calls"], 4) if b["calls"] else None}
        for _, b in sorted(bins.items())
    ]


def failure_rate_by_step_figure(rows: list[dict[str, Any]]) -> dict[str, Any]:
    bins = _step_bins(rows)
    bars = rate_bars(bins, "label")
    bars["marker"] = {
        "color": "#b3261e",
        "opacity": [0.35 if b["calls"] < FEW_CALLS else 1 for b in bins],
    }
    bars["hovertext"] = [
        f"step {b['label']}: {b['failed']} of {b['calls']} calls failed" for b in bins
    ]
    bars["hoverinfo"] = "text"
    return figure(
        [bars],
        layout(
            xaxis={"title": {"text": "step index"}, "type": "category"},
            yaxis=pct_axis([bars]),
        ),
    )


def retry_distribution_figure(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Calls by retries, on a log axis when most calls were never retried (one tall bar
    hid the rest), with room for at least 0-3 retries."""
    x = [r["retries"] for r in rows]
    counts = [r["calls"] for r in rows if r["calls"]]
    skewed = bool(counts) and max(counts) > 20 * min(counts)
    return figure(
        [
            {
                "type": "bar",
                "name": "calls",
                "x": x,
                "y": [r["calls"] for r in rows],
                "text": [str(r["calls"]) for r in rows],
                "textposition": "outside",
                "marker": {"color": "#5c7cfa"},
            },
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": "succeeded %",
                "x": x,
                "y": [pct(r["success_rate"]) for r in rows],
                "yaxis": "y2",
                "marker": {"color": "#1e7b34"},
            },
        ],
        layout(
            xaxis={
                "title": {"text": "retries (attempts - 1)"},
                "dtick": 1,
                "range": [-0.5, max([3, *x]) + 0.5],
            },
            yaxis={"title": {"text": "calls" + (" (log scale)" if skewed else "")}}
            | ({"type": "log"} if skewed else {"rangemode": "tozero"}),
            yaxis2={
                "title": {"text": "succeeded %"},
                "overlaying": "y",
                "side": "right",
                "range": [0, 105],
            },
            legend={"orientation": "h", "y": -0.3},
        ),
    )
