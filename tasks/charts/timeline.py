"""The task page's execution timeline as a Plotly figure dict (task_timeline): reads the
events and calls into a frame, then assembles its traces, layout and text alternative.

Built from the task's event summaries, its tool-call attempt logs and its checkpoint marks
(see tasks.selectors / checkpoints.selectors); the template only embeds the dict. Bars are
horizontal Plotly bars on a date axis (`base` = start, `x` = duration in ms), one trace per
kind, so a 1,000-step task stays a handful of traces.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tasks.charts.checkpoint_marks import checkpoint_names, checkpoint_traces, superseded_ranges
from tasks.charts.formatting import duration_text, plotly_text, plotly_time
from tasks.charts.frame import Collapsed, Frame
from tasks.charts.idle import idle_breaks
from tasks.charts.layout import timeline_layout
from tasks.charts.legend import ROW_CHECKPOINTS, ROW_MODEL, ROW_RECOVERY, ROW_STEPS, tool_row
from tasks.charts.marks import mark_traces
from tasks.charts.overview import overview_traces
from tasks.charts.scope import COLLAPSED_CHECKPOINT_TRIGGERS
from tasks.charts.summary import timeline_summary
from tasks.models import Task
from tasks.selectors.event_fields import iso_datetime
from tasks.states import TERMINAL as TERMINAL_STATUSES
from tasks.states import TaskStatus


def task_timeline(
    *,
    task: Task,
    events: list[dict[str, Any]],
    calls: list[dict[str, Any]],
    checkpoints: list[dict[str, Any]],
    now: datetime,
    from_step: int | None = None,
) -> dict[str, Any]:
    """The timeline figure: steps, model calls and every tool-call attempt as bars; time
    waiting for a human (and in retry backoff) as shaded spans; checkpoints as markers by
    level (one trace per level, superseded ones dimmed in their own trace); errors as ✕.
    `summary` holds its text alternative (see timeline_summary); the page takes it out.

    `from_step`: the steps before it are collapsed (of them, `events` and `calls` hold only
    what the note on TIMELINE_STEPS lists; `checkpoints` are all of them, for the spans a
    rollback superseded). What the timeline keeps of them (failed attempts as ✕, waits, recoveries,
    key checkpoints) is drawn on an overview axis of its own left of the detailed one."""
    checkpoints = [{**cp, "at": iso_datetime(cp["at"])} for cp in checkpoints]
    frame = Frame()
    frame.read_events(events, now=now)
    frame.read_calls(
        [{**call, "number": call.get("number", n)} for n, call in enumerate(calls, 1)],
        task_id=task.id,
        now=now,
        bars_from_step=from_step,
    )
    if task.status == TaskStatus.RUNNING and frame.steps:
        frame.extend_step(max(frame.steps), now, now)
    collapsed = None
    if from_step is not None:
        shown = [index for index in frame.steps if index >= from_step]
        frame.steps = {index: frame.steps[index] for index in shown}
        if shown:
            collapsed = Collapsed(until=min(frame.steps[i][0] for i in shown), steps=from_step)
    for index in sorted(frame.steps):
        start, end = frame.steps[index]
        frame.steps_bars.add(
            ROW_STEPS,
            start,
            end,
            [f"step {index} · {duration_text((end - start).total_seconds())}"],
        )

    superseded = superseded_ranges(checkpoints)
    marked = checkpoints
    if from_step is not None:
        marked = [
            cp
            for cp in checkpoints
            if (cp["step_index"] or 0) >= from_step
            or cp["trigger"] in COLLAPSED_CHECKPOINT_TRIGGERS
        ]
    data = [b.trace(superseded) for b in frame.bar_traces() if b.rows]
    data += checkpoint_traces(marked, checkpoint_names(marked, events))
    data += mark_traces(frame.marks)
    if frame.errors["x"]:
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": "errors",
                "y": plotly_text(frame.errors["y"]),
                "x": [plotly_time(x) for x in frame.errors["x"]],
                "hovertext": frame.errors["text"],
                "hoverinfo": "text",
                "marker": {"symbol": "x", "size": 10, "color": "#b3261e", "line": {"width": 1}},
                "meta": {"kind": "errors"},
                # A failed attempt's ✕ opens its call, as its bar does.
                **({"customdata": frame.errors["links"]} if any(frame.errors["links"]) else {}),
            }
        )

    tool_rows = sorted(
        {tool_row(c["tool"]) for c in calls}
        | {y for y in frame.errors["y"] if y.startswith("tool · ")}
    )
    rows = [ROW_STEPS, ROW_MODEL, *sorted(set(frame.node_bars.rows)), *tool_rows]
    rows += [row for row, bars in frame.waits.items() if bars.rows]
    if frame.marks:
        rows.append(ROW_RECOVERY)
    if marked:
        rows.append(ROW_CHECKPOINTS)
    busy = frame.busy()
    busy += [(cp["at"], cp["at"]) for cp in marked if cp["at"] is not None]
    if task.status not in TERMINAL_STATUSES:
        busy.append((now, now))  # a wait that is still going on ends at "now", not in a gap
    overview = None
    if collapsed is not None:
        early = [span for span in busy if span[0] < collapsed.until]
        if early:
            busy = [span for span in busy if span[0] >= collapsed.until]
            # The overview keeps its time scale but for spans past IDLE_GAP_S[1].
            overview = (early, idle_breaks(early, waits=frame.waits, long_only=True), collapsed)
            data = overview_traces(data, split=plotly_time(collapsed.until))
    breaks = idle_breaks(busy, waits=frame.waits)
    return {
        "data": data,
        "layout": timeline_layout(frame, rows=rows, busy=busy, breaks=breaks, overview=overview),
        "summary": timeline_summary(frame, checkpoints=checkpoints, collapsed=collapsed),
    }
