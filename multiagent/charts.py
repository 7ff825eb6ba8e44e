"""The group timeline: one lane per agent (the root's and each child's status over time) and
the global checkpoints as lines across all lanes. Figure data only; templates embed it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from multiagent.models import GlobalCheckpoint
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
}


def _lane(task: Task) -> str:
    return f"{task.agent_name or 'parent'} · {str(task.id)[:8]}"


def group_timeline(
    *, members: list[Task], global_checkpoints: list[GlobalCheckpoint], now: datetime
) -> dict[str, Any]:
    """Bars of each member's statuses (from its `status` events) on its own lane; dashed
    lines at the global checkpoints, clickable to their group rollback preview."""
    by_status: dict[str, dict[str, list]] = {}
    lanes = [_lane(t) for t in members]
    events = TaskEvent.objects.filter(task__in=members, type=EventType.STATUS).order_by("id")
    lane_of = {t.id: _lane(t) for t in members}
    open_since: dict[Any, tuple[str, datetime]] = {}

    def close(task_id: Any, end: datetime) -> None:
        if task_id not in open_since:
            return
        status, start = open_since.pop(task_id)
        if status not in LANE_COLORS:
            return
        bars = by_status.setdefault(status, {"y": [], "x": [], "base": [], "text": []})
        bars["y"].append(lane_of[task_id])
        bars["x"].append(max((end - start).total_seconds() * 1000, 1))
        bars["base"].append(start.isoformat())
        bars["text"].append(status)

    for event in events.only("task_id", "payload", "created_at"):
        close(event.task_id, event.created_at)
        open_since[event.task_id] = (event.payload.get("to", ""), event.created_at)
    for task_id in list(open_since):
        close(task_id, now)
    data: list[dict[str, Any]] = [
        {
            "type": "bar",
            "orientation": "h",
            "name": status,
            "y": bars["y"],
            "x": bars["x"],
            "base": bars["base"],
            "text": bars["text"],
            "marker": {"color": LANE_COLORS[status]},
            "hovertemplate": "%{y}: %{text}<extra></extra>",
        }
        for status, bars in by_status.items()
    ]
    shapes, annotations = [], []
    for cut in global_checkpoints:
        at = cut.created_at.isoformat()
        shapes.append(
            {
                "type": "line",
                "xref": "x",
                "yref": "paper",
                "x0": at,
                "x1": at,
                "y0": 0,
                "y1": 1,
                "line": {"dash": "dash", "color": "#444" if not cut.superseded else "#ced4da"},
            }
        )
        annotations.append(
            {"x": at, "y": 1, "yref": "paper", "text": f"G{cut.seq}", "showarrow": False}
        )
    data.append(
        {
            "type": "scatter",
            "mode": "markers",
            "name": "global checkpoints",
            "x": [c.created_at.isoformat() for c in global_checkpoints],
            "y": [lanes[0]] * len(global_checkpoints),
            "marker": {"symbol": "diamond", "size": 11, "color": "#111"},
            "text": [f"G{c.seq} ({c.trigger})" for c in global_checkpoints],
            "customdata": [
                f"/tasks/{c.root_id}/group-rollback/?global_checkpoint_id={c.id}"
                for c in global_checkpoints
            ],
            "hovertemplate": "%{text}<extra></extra>",
        }
    )
    return {
        "data": data,
        "layout": {
            "barmode": "overlay",
            "height": 120 + 36 * len(lanes),
            "margin": {"l": 150, "r": 20, "t": 30, "b": 40},
            "xaxis": {"type": "date"},
            "yaxis": {"categoryorder": "array", "categoryarray": lanes[::-1]},
            "shapes": shapes,
            "annotations": annotations,
            "showlegend": True,
            "legend": {"orientation": "h"},
        },
    }
