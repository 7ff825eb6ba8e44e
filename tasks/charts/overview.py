"""The overview of a long task's collapsed steps: an axis of its own (x2) left of the
detailed one, each trace cut in two at the first step drawn in full."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tasks.charts.formatting import plotly_time
from tasks.charts.frame import Collapsed
from tasks.charts.idle import IdleBreak, padded_range

# The share of the plot's width the overview of collapsed steps takes.
OVERVIEW_WIDTH = 0.22


def overview_traces(data: list[dict[str, Any]], *, split: str) -> list[dict[str, Any]]:
    """Each trace cut in two at time `split`: the points before it on the overview axis (x2),
    the others on the detailed one; both halves one legend entry (legendgroup)."""
    traces = []
    for trace in data:
        times = trace["base"] if trace["type"] == "bar" else trace["x"]
        early = [at < split for at in times]
        if not any(early):
            traces.append(trace)
            continue
        halves = [
            (on_overview, [i for i, e in enumerate(early) if e == on_overview])
            for on_overview in (False, True)
        ]
        halves = [(on_overview, picked) for on_overview, picked in halves if picked]
        for on_overview, picked in halves:
            half = _points(trace, picked, len(times))
            half["legendgroup"] = trace["name"]
            if on_overview:
                half["xaxis"] = "x2"
                half["showlegend"] = len(halves) == 1
            traces.append(half)
    return traces


def _points(trace: dict[str, Any], picked: list[int], n: int) -> dict[str, Any]:
    """`trace` with only the points `picked` of its `n` (every per-point list cut, the
    marker's too)."""

    def cut(value: Any) -> Any:
        if isinstance(value, list) and len(value) == n:
            return [value[i] for i in picked]
        if isinstance(value, dict):
            return {key: cut(inner) for key, inner in value.items()}
        return value

    return {key: cut(value) for key, value in trace.items()}


def add_overview(
    layout: dict[str, Any],
    busy: list[tuple[datetime, datetime]],
    breaks: list[IdleBreak],
    collapsed: Collapsed,
) -> None:
    """The overview axis of the collapsed steps (x2, on the left; the category axis' labels
    beside it), and the shapes and labels before `collapsed.until` moved onto it."""
    split = plotly_time(collapsed.until)
    for item in [*layout["shapes"], *layout["annotations"]]:
        if item.get("x0", item.get("x")) < split:
            item["xref"] = "x2"
    layout["xaxis"]["domain"] = [OVERVIEW_WIDTH + 0.03, 1]
    layout["xaxis2"] = {
        "type": "date",
        "domain": [0, OVERVIEW_WIDTH],
        "anchor": "y",
        "title": {"text": f"steps 0–{collapsed.steps - 1}, collapsed"},
        "rangebreaks": [{"bounds": [plotly_time(b.start), plotly_time(b.end)]} for b in breaks],
        "range": padded_range(busy, breaks),
        "nticks": 3,
    }
    layout["yaxis"]["anchor"] = "x2"
