"""The group timeline: one lane per agent (the root's and each child's status over time) and
the global checkpoints as lines across all lanes. Work a rollback abandoned is drawn apart
(faded and hatched, in a trace of its own); group rollbacks are lines of their own. Figure
data only; templates embed it."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from checkpoints.selectors import checkpoint_supersession_marks
from multiagent.models import GlobalCheckpoint
from tasks.charts.checkpoint_marks import superseded_ranges
from tasks.charts.formatting import (
    category_axis,
    duration_text,
    plotly_escape,
    plotly_hover,
    plotly_text,
    plotly_time,
)
from tasks.charts.legend import SUPERSEDED_OPACITY
from tasks.events import EventType
from tasks.models import Task, TaskEvent

LANE_COLORS = {
    "running": "#2457c5",
    "waiting_children": "#adb5bd",
    "waiting_review": "#c77700",
    "prepared": "#7b3fbf",
    "retry_wait": "#e8590c",
    "queued": "#dee2e6",
    "held": "#868e96",
    "stalled": "#c92a2a",
    "compensation_failed": "#c92a2a",
}
ROLLBACK_COLOR = "#6b2fb3"
SUPERSEDED = "superseded (rolled back)"
# Labels above the plot closer than this share of the time axis go on separate lines (a
# "rollback to G3" is a fifth of a narrow plot wide).
LABEL_GAP = 0.2
LABEL_LINES = 3
# Statuses the text alternative names per agent (the newest).
SUMMARY_SPANS = 20


def _lane(task: Task) -> str:
    return f"{task.agent_name or 'parent'} · {str(task.id)[:8]}"


@dataclass
class _Lanes:
    """Status bars by trace: one trace per status, and the superseded ones apart."""

    traces: dict[str, dict[str, list]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )
    # Per lane, (status, seconds, superseded) in order: the text alternative.
    spans: dict[str, list[tuple[str, float, bool]]] = field(
        default_factory=lambda: defaultdict(list)
    )

    def add(self, *, lane: str, status: str, start: datetime, end: datetime, gone: bool) -> None:
        seconds = (end - start).total_seconds()
        bars = self.traces[SUPERSEDED if gone else status]
        bars["y"].append(lane)
        bars["x"].append(max(seconds * 1000, 1))
        bars["base"].append(plotly_time(start))
        bars["text"].append(status)
        bars["color"].append(LANE_COLORS[status])
        bars["hover"].append(
            plotly_hover(
                [
                    f"{lane}: {status} · {duration_text(seconds)}",
                    "superseded: undone by a rollback" if gone else "",
                ]
            )
        )
        self.spans[lane].append((status, seconds, gone))

    def data(self) -> list[dict[str, Any]]:
        data = []
        for name, bars in self.traces.items():
            gone = name == SUPERSEDED
            marker: dict[str, Any] = {"color": bars["color"]}
            if gone:
                marker.update(opacity=SUPERSEDED_OPACITY, pattern={"shape": "/", "solidity": 0.3})
            data.append(
                {
                    "type": "bar",
                    "orientation": "h",
                    "name": name,
                    "y": plotly_text(bars["y"]),
                    "x": bars["x"],
                    "base": bars["base"],
                    "text": bars["text"],
                    # Printed inside a bar when it fits there, else left to the hover: labels
                    # of short bars never print over each other.
                    "textposition": "inside",
                    "insidetextanchor": "middle",
                    "hovertext": bars["hover"],
                    "hoverinfo": "text",
                    "marker": marker,
                    "meta": {"kind": "superseded" if gone else "status"},
                }
            )
        return data


def group_timeline(
    *, members: list[Task], global_checkpoints: list[GlobalCheckpoint], now: datetime
) -> dict[str, Any]:
    """Bars of each member's statuses (from its `status` events) on its own lane, faded and
    hatched where a rollback later abandoned that work; dashed lines at the global
    checkpoints, clickable to their group rollback preview, and at group rollbacks.
    `summary` holds the text alternative; the page takes it out."""
    lanes = [_lane(t) for t in members]
    lane_of = {t.id: _lane(t) for t in members}
    abandoned = {
        task_id: superseded_ranges(marks)
        for task_id, marks in checkpoint_supersession_marks(task_ids=list(lane_of)).items()
    }
    events = TaskEvent.objects.filter(
        task__in=members, type__in=(EventType.STATUS, EventType.GROUP_ROLLBACK)
    ).order_by("id")
    found = _Lanes()
    open_since: dict[Any, tuple[str, datetime]] = {}
    rollbacks: list[tuple[datetime, str]] = []

    def close(task_id: Any, end: datetime) -> None:
        if task_id not in open_since:
            return
        status, start = open_since.pop(task_id)
        if status in LANE_COLORS:
            gone = any(lo < start < hi for lo, hi in abandoned[task_id])
            found.add(lane=lane_of[task_id], status=status, start=start, end=end, gone=gone)

    for event in events.only("task_id", "type", "payload", "created_at"):
        if event.type == EventType.GROUP_ROLLBACK:
            if event.task_id == members[0].id:
                rollbacks.append(
                    (event.created_at, f"rollback to G{event.payload.get('global_seq', '?')}")
                )
            continue
        close(event.task_id, event.created_at)
        open_since[event.task_id] = (event.payload.get("to", ""), event.created_at)
    for task_id in list(open_since):
        close(task_id, now)

    data = found.data()
    data.append(
        {
            "type": "scatter",
            "mode": "markers",
            "name": "global checkpoints",
            "x": [plotly_time(c.created_at) for c in global_checkpoints],
            "y": [plotly_escape(lanes[0])] * len(global_checkpoints),
            "marker": {
                "symbol": "diamond",
                "size": 11,
                "color": ["#ced4da" if c.superseded else "#111" for c in global_checkpoints],
            },
            "hovertext": [
                plotly_hover(
                    [
                        f"global checkpoint G{c.seq} ({c.trigger})",
                        "superseded" if c.superseded else "click to preview a group rollback",
                    ]
                )
                for c in global_checkpoints
            ],
            "hoverinfo": "text",
            "customdata": [
                f"/tasks/{c.root_id}/group-rollback/?global_checkpoint_id={c.id}"
                for c in global_checkpoints
            ],
            "meta": {"kind": "global checkpoints"},
        }
    )
    marks = [
        (c.created_at, f"G{c.seq}", "#ced4da" if c.superseded else "#444")
        for c in global_checkpoints
    ]
    marks += [(at, text, ROLLBACK_COLOR) for at, text in rollbacks]
    shapes, annotations = _marks_layout(marks)
    return {
        "data": data,
        "layout": {
            "barmode": "overlay",
            "height": 120 + 36 * len(lanes) + 16 * max(0, _lines(annotations) - 1),
            "margin": {"l": 150, "r": 20, "t": 14 + 16 * _lines(annotations), "b": 40},
            "xaxis": {"type": "date"},
            "yaxis": category_axis(lanes),
            "uniformtext": {"mode": "hide", "minsize": 10},
            "shapes": shapes,
            "annotations": annotations,
            "showlegend": True,
            # Beside the lanes: below them it would cover the time axis' two-line labels,
            # above them the labels of the checkpoints and rollbacks.
            "legend": {"orientation": "v", "x": 1.02, "xanchor": "left", "y": 1, "yanchor": "top"},
        },
        "summary": _summary(found, global_checkpoints, rollbacks),
    }


def _marks_layout(
    marks: list[tuple[datetime, str, str]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A dashed line across the lanes at each mark and its label above the plot; a label too
    close to the one before it on a line goes to the next line (up to LABEL_LINES)."""
    marks = sorted(marks)
    span = (marks[-1][0] - marks[0][0]).total_seconds() if marks else 0.0
    last_on_line: list[datetime | None] = [None] * LABEL_LINES
    shapes, annotations = [], []
    for i, (at, text, color) in enumerate(marks):
        free = [
            n
            for n, last in enumerate(last_on_line)
            if last is None or (at - last).total_seconds() > LABEL_GAP * span
        ]
        line = free[0] if free else i % LABEL_LINES
        last_on_line[line] = at
        x = plotly_time(at)
        shapes.append(
            {
                "type": "line",
                "xref": "x",
                "yref": "paper",
                "x0": x,
                "x1": x,
                "y0": 0,
                "y1": 1,
                "line": {"dash": "dash", "color": color},
            }
        )
        annotations.append(
            {
                "x": x,
                "y": 1,
                "yref": "paper",
                "yanchor": "bottom",
                "yshift": 16 * line,
                "text": plotly_escape(text),
                "showarrow": False,
                "font": {"size": 11, "color": color},
                "bgcolor": "rgba(255,255,255,0.85)",
            }
        )
    return shapes, annotations


def _lines(annotations: list[dict[str, Any]]) -> int:
    return 1 + max((a["yshift"] // 16 for a in annotations), default=0)


def _summary(
    found: _Lanes,
    global_checkpoints: list[GlobalCheckpoint],
    rollbacks: list[tuple[datetime, str]],
) -> dict[str, Any]:
    """The group timeline as text: per agent its statuses in order with their durations."""
    items = [
        f"{lane}: "
        + ("… " if len(spans) > SUMMARY_SPANS else "")
        + ", ".join(
            f"{status} {duration_text(seconds)}" + (" (superseded)" if gone else "")
            for status, seconds, gone in spans[-SUMMARY_SPANS:]
        )
        for lane, spans in found.spans.items()
    ]
    items += [
        f"global checkpoint G{c.seq} at {plotly_time(c.created_at)[:19]} UTC"
        + (" (superseded)" if c.superseded else "")
        for c in global_checkpoints
    ]
    items += [f"{text} at {plotly_time(at)[:19]} UTC" for at, text in rollbacks]
    return {"headline": f"{len(found.spans)} agents", "items": items}
