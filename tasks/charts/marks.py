"""Interventions and recoveries (rollbacks, retries, forward recoveries, redispatches,
holds) as markers on the timeline's recovery row, one trace per kind."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tasks.charts.formatting import plotly_text, plotly_time
from tasks.charts.legend import ROW_RECOVERY

# Interventions and recoveries, each its own trace on the "recovery" row: event type ->
# (trace name, marker symbol, colour).
RECOVERY_MARKS = {
    "rollback": ("rollbacks", "triangle-left", "#6b2fb3"),
    "retry": ("retries", "circle-open", "#b26a00"),
    "retry_scheduled": ("retries", "circle-open", "#b26a00"),
    "forward": ("forward recoveries", "triangle-right", "#2457c5"),
    "redispatched": ("redispatches", "square-open", "#2457c5"),
    "held": ("holds", "line-ns-open", "#5b3a8c"),
}


def mark_add(marks: dict[str, dict[str, list[Any]]], kind: str, at: datetime, text: str) -> None:
    name = RECOVERY_MARKS[kind][0]
    marks[name]["x"].append(at)
    marks[name]["text"].append(text)
    marks[name]["kind"].append(kind)


def recovery_text(e: dict[str, Any]) -> str:
    kind = e["type"]
    who = f" by {e['actor']}" if e.get("actor") else ""
    why = f": {e['reason']}" if e.get("reason") else ""
    if kind in ("rollback", "retry", "forward") and e.get("from_seq") is not None:
        return f"{kind} to checkpoint #{e['from_seq']}{who}{why}"[:300]
    if kind == "retry_scheduled":
        return f"retry scheduled after {e.get('error_class') or 'an error'}"[:300]
    return f"{kind.replace('_', ' ')}{who}{why}"[:300]


def mark_traces(marks: dict[str, dict[str, list[Any]]]) -> list[dict[str, Any]]:
    traces = []
    for name, mark in marks.items():
        _, symbol, color = RECOVERY_MARKS[mark["kind"][0]]
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": name,
                "y": [ROW_RECOVERY] * len(mark["x"]),
                "x": [plotly_time(x) for x in mark["x"]],
                "hovertext": plotly_text(mark["text"]),
                "hoverinfo": "text",
                "marker": {"symbol": symbol, "size": 12, "color": color, "line": {"width": 2}},
                "meta": {"kind": "recovery"},
            }
        )
    return traces
