"""Figure data for the overview and the failure statistics: Plotly figure dicts built from the
rows of dashboard.stats. Points carry the URL of the pre-filtered task list in `customdata`;
static/dashboard.js follows it on click. Tool names and error classes are escaped wherever
Plotly prints them (ticks, legend, pie labels, hover: see tasks.charts.formatting.plotly_escape)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.urls import reverse

from dashboard.windows import Window
from tasks.charts.formatting import plotly_escape, plotly_text, plotly_time, time_zone_name

OUTCOME_COLORS = {
    "approved": "#1e7b34",
    "edited": "#5c940d",
    "rejected": "#b3261e",
    "expired": "#b26a00",
    "canceled": "#868e96",
    "pending": "#2457c5",
}


def task_list_url(**filters: Any) -> str:
    return (
        reverse("tasks:list")
        + "?"
        + urlencode(
            {
                k: v.isoformat() if isinstance(v, datetime) else v
                for k, v in filters.items()
                if v not in (None, "")
            }
        )
    )


def layout(**extra: Any) -> dict[str, Any]:
    return {
        "height": 320,
        "margin": {"l": 60, "r": 60, "t": 30, "b": 60},
        "hovermode": "closest",
        **extra,
    }


def figure(data: list[dict[str, Any]], layout: dict[str, Any]) -> dict[str, Any]:
    """A figure; one without any point says so instead of drawing empty axes."""
    if not any(trace.get("x") or trace.get("values") for trace in data):
        layout = {
            **layout,
            "xaxis": {"visible": False},
            "yaxis": {"visible": False},
            "annotations": [
                {
                    "text": "no data in this window",
                    "showarrow": False,
                    "xref": "paper",
                    "yref": "paper",
                    "x": 0.5,
                    "y": 0.5,
                    "font": {"color": "#6b7480"},
                }
            ],
        }
    return {"data": data, "layout": layout}


def _label(value: Any) -> Any:
    """A category as Plotly prints it: text escaped, numbers as they are."""
    return plotly_escape(value) if isinstance(value, str) else value


def pct(rate: float | None) -> float | None:
    return None if rate is None else round(rate * 100, 2)


def pct_axis(data: list[dict[str, Any]]) -> dict[str, Any]:
    """A y axis of percentages (ticks read "20%"), from 0 % to a little above the highest
    point: at least 0-10 % (no failures do not draw a 0-1 axis), at most 0-100 %."""
    top = max((y for trace in data for y in trace["y"] if y is not None), default=0)
    return {
        "title": {"text": "failed calls"},
        "ticksuffix": "%",
        "range": [0, min(100, max(10, top * 1.1))],
    }


def failure_rate_over_time_figure(rows: list[dict[str, Any]], window: Window) -> dict[str, Any]:
    step = timedelta(hours=1) if window.bucket == "hour" else timedelta(days=1)
    by_tool: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_tool.setdefault(row["tool"], []).append(row)
    data = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": plotly_escape(tool),
            "x": [plotly_time(r["bucket"]) for r in points],
            "y": [pct(r["rate"]) for r in points],
            "text": plotly_text(
                [f"{tool}: {r['failed']}/{r['calls']} calls failed" for r in points]
            ),
            "hoverinfo": "text+x",
            "customdata": [
                task_list_url(
                    tool=tool,
                    created_from=r["bucket"].date(),
                    created_to=(r["bucket"] + step).date(),
                )
                for r in points
            ],
        }
        for tool, points in sorted(by_tool.items())
    ]
    return figure(
        data,
        layout(
            xaxis={
                "type": "date",
                "title": {"text": f"{window.bucket} ({time_zone_name()})"},
                "range": time_range([r["bucket"] for r in rows], window, step),
            },
            yaxis=pct_axis(data),
        ),
    )


def time_range(buckets: list[datetime], window: Window, step: timedelta) -> list[str]:
    """The x range of a chart over time: from half a bucket before the first point (the
    window's start when there is none) to half a bucket past the window's end. Points that
    all fall in the last hours of a long window fill the chart instead of sitting on its right
    edge; the axis' dates say which hours they are."""
    lo = min(buckets) - step / 2 if buckets else window.since
    hi = max(window.until, *buckets) + step / 2 if buckets else window.until
    return [plotly_time(lo), plotly_time(hi)]


def error_class_mix_figure(rows: list[dict[str, Any]], window: Window) -> dict[str, Any]:
    return figure(
        [
            {
                "type": "pie",
                "hole": 0.45,
                "sort": False,
                "labels": [plotly_escape(r["error_class"] or "(none)") for r in rows],
                "values": [r["tasks"] for r in rows],
                "customdata": [
                    task_list_url(
                        status="failed",
                        error_class=r["error_class"],
                        finished_from=window.since,
                        finished_to=window.until,
                    )
                    for r in rows
                ],
            }
        ],
        layout(showlegend=True),
    )


def rate_bars(rows: list[dict[str, Any]], key: str) -> dict[str, Any]:
    return {
        "type": "bar",
        "name": "failure rate",
        "x": [_label(r[key]) for r in rows],
        "y": [pct(r["rate"]) for r in rows],
        "text": [f"{r['failed']}/{r['calls']}" for r in rows],
        "textposition": "auto",
        "marker": {"color": "#b3261e"},
    }


def failure_rate_by_tool_figure(rows: list[dict[str, Any]]) -> dict[str, Any]:
    bars = rate_bars(rows, "tool")
    bars["customdata"] = [task_list_url(tool=r["tool"]) for r in rows]
    return figure([bars], layout(yaxis=pct_axis([bars])))


def error_heatmap_figure(rows: list[dict[str, Any]]) -> dict[str, Any]:
    tools = sorted({r["tool"] for r in rows})
    classes = sorted({r["error_class"] for r in rows})
    cells = {(r["tool"], r["error_class"]): r["failed"] for r in rows}
    return figure(
        [
            {
                "type": "heatmap",
                "name": "failed calls",
                "x": [plotly_escape(c or "(none)") for c in classes],
                "y": plotly_text(tools),
                "z": [[cells.get((t, c), 0) for c in classes] for t in tools],
                "colorscale": "Reds",
                "xgap": 2,
                "ygap": 2,
                "texttemplate": "%{z}",
                "hovertemplate": "%{y} · %{x}: %{z}<extra></extra>",
                "customdata": [[task_list_url(tool=t) for _ in classes] for t in tools],
            }
        ],
        # As tall as the charts beside it, and 44 px a tool beyond that: cells big enough to
        # read their counts.
        layout(
            height=max(320, 110 + 44 * len(tools)),
            margin={"l": 140, "r": 40, "t": 20, "b": 90},
            xaxis={"automargin": True, "tickangle": -30},
            yaxis={"automargin": True},
        ),
    )


def duration_percentiles_figure(rows: list[dict[str, Any]]) -> dict[str, Any]:
    tools = plotly_text([r["tool"] for r in rows])
    return figure(
        [
            {
                "type": "bar",
                "name": "p50",
                "x": tools,
                "y": [r["p50_ms"] for r in rows],
                "marker": {"color": "#5c7cfa"},
            },
            {
                "type": "bar",
                "name": "p95",
                "x": tools,
                "y": [r["p95_ms"] for r in rows],
                "marker": {"color": "#c77700"},
            },
        ],
        layout(barmode="group", yaxis={"title": {"text": "ms"}}),
    )


def review_outcomes_figure(rows: list[dict[str, Any]]) -> dict[str, Any]:
    tools = plotly_text([r["tool"] for r in rows])
    return figure(
        [
            {
                "type": "bar",
                "name": outcome,
                "x": tools,
                "y": [r[outcome] for r in rows],
                "marker": {"color": color},
            }
            for outcome, color in OUTCOME_COLORS.items()
        ],
        layout(barmode="stack", yaxis={"title": {"text": "reviews"}}),
    )
