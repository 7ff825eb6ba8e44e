"""The timeline's layout: the time axis with its idle breaks and their labels, review waits
shaded, rollbacks as lines, the rows as a category axis (and the overview axis, if any)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tasks.charts.formatting import (
    category_axis,
    plotly_escape,
    plotly_time,
    span_end,
    time_zone_name,
)
from tasks.charts.frame import Collapsed, Frame
from tasks.charts.idle import IdleBreak, padded_range
from tasks.charts.legend import ROW_HUMAN
from tasks.charts.marks import RECOVERY_MARKS
from tasks.charts.overview import add_overview

# A plan task's phases (Frame.phases) as the timeline names them.
PHASE_LABELS = {"plan": "plan phase (dry run)", "execution": "execution phase"}
PHASE_COLOR = "#0b7285"


def _vline(x: Any, *, color: str, width: int, dash: str) -> dict[str, Any]:
    """A vertical line across the whole plot at time `x` (a break, a rollback)."""
    return {
        "type": "line",
        "xref": "x",
        "yref": "paper",
        "y0": 0,
        "y1": 1,
        "x0": plotly_time(x),
        "x1": plotly_time(x),
        "line": {"color": color, "width": width, "dash": dash},
    }


def timeline_layout(
    frame: Frame,
    *,
    rows: list[str],
    busy: list[tuple[datetime, datetime]],
    breaks: list[IdleBreak],
    overview: tuple[list[tuple[datetime, datetime]], list[IdleBreak], Collapsed] | None = None,
) -> dict[str, Any]:
    """The layout; `overview`: the busy spans, breaks and extent of the collapsed steps, drawn
    on an axis of their own (x2) left of the detailed one."""
    early_breaks = overview[1] if overview else []
    all_breaks = sorted([*early_breaks, *breaks], key=lambda b: b.start)
    human = frame.waits[ROW_HUMAN]
    shapes = [
        {
            "type": "rect",
            "xref": "x",
            "yref": "paper",
            "y0": 0,
            "y1": 1,
            "x0": plotly_time(start),
            "x1": plotly_time(span_end(start, ms)),
            "fillcolor": "rgba(178,106,0,0.12)",
            "line": {"width": 0},
            "layer": "below",
            "name": "review wait",
        }
        for start, ms in zip(human.starts, human.durations, strict=True)
    ]
    shapes += [_vline(b.start, color="#6b7480", width=2, dash="dot") for b in all_breaks]
    shapes += [
        _vline(x, color=RECOVERY_MARKS["rollback"][2], width=1, dash="dash")
        for x in frame.marks.get("rollbacks", {}).get("x", [])
    ]
    # A plan task's phases: where its dry run and its execution run begin.
    shapes += [_vline(at, color=PHASE_COLOR, width=2, dash="solid") for at, _ in frame.phases]
    annotations = [
        {
            "x": plotly_time(at),
            "xref": "x",
            "y": 0,
            "yref": "paper",
            "yanchor": "top",
            "xanchor": "left",
            "text": PHASE_LABELS.get(phase, phase),
            "showarrow": False,
            "font": {"size": 11, "color": PHASE_COLOR},
            "bgcolor": "rgba(255,255,255,0.85)",
            "name": "plan phase",
        }
        for at, phase in frame.phases
    ]
    annotations += [
        {
            "x": plotly_time(b.start),
            "xref": "x",
            "y": 1,
            "yref": "paper",
            "yanchor": "bottom",
            # Every other label a line higher: breaks a few pixels apart stay legible.
            "yshift": 16 * (i % 2),
            "text": plotly_escape(b.label),
            "showarrow": False,
            "font": {"size": 11, "color": "#6b7480"},
            "bgcolor": "rgba(255,255,255,0.85)",
        }
        for i, b in enumerate(all_breaks)
    ]
    layout = {
        "barmode": "overlay",
        "height": 140 + 34 * len(rows),
        "hovermode": "closest",
        "margin": {"l": 150, "r": 20, "t": 10 + 16 * min(len(breaks), 2), "b": 40},
        "xaxis": {
            "type": "date",
            "title": {
                "text": f"time ({time_zone_name()})" + (", idle spans cut out" if breaks else "")
            },
            "rangebreaks": [{"bounds": [plotly_time(b.start), plotly_time(b.end)]} for b in breaks],
            # Plotly pads an autorange by the uncut span: with breaks, the range is set.
            **({"range": padded_range(busy, breaks)} if breaks else {}),
        },
        "annotations": annotations,
        "yaxis": category_axis(rows),
        "legend": {"orientation": "h", "y": -0.25},
        "shapes": shapes,
    }
    if overview is not None:
        add_overview(layout, *overview)
    return layout
