"""Figure data for the task page: the execution timeline as a Plotly figure dict.

Built from the task's event summaries, its tool-call attempt logs and its checkpoint marks
(see tasks.selectors / checkpoints.selectors); the template only embeds the dict. Bars are
horizontal Plotly bars on a date axis (`base` = start, `x` = duration in ms), one trace per
kind, so a 1,000-step task stays a handful of traces.
"""

from __future__ import annotations

import bisect
import html
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote, urlencode

from django.urls import reverse

from tasks.models import Task, ToolCallStatus
from tasks.selectors import iso_datetime
from tasks.states import TERMINAL as TERMINAL_STATUSES
from tasks.states import TaskStatus

# The events the timeline reads (the rest of the frame log is in the events tab).
TIMELINE_EVENT_TYPES = frozenset(
    {
        "model_decision",
        "step_finished",
        "model_error",
        "tool_refused",
        "task_stopped",
        "status",
        "graph_node",  # a LangGraph node run (tasks.graph_runner)
        # The call a tool-level checkpoint was taken before (see checkpoint_names).
        *("tool_started", "review_requested"),
        *("rollback", "retry", "forward", "retry_scheduled", "redispatched"),
    }
)

# A long task's timeline draws its last TIMELINE_STEPS steps in full; of the earlier steps
# (collapsed) it keeps what an operator looks for: the calls that failed or were retried,
# errors, review waits and holds, recoveries and rollbacks (TIMELINE_KEPT_EVENTS, plus the
# graph nodes that failed), and the checkpoints that start a task, follow a rollback or an
# operator's hand, or precede a review (COLLAPSED_CHECKPOINT_TRIGGERS). "Show all steps"
# draws everything.
TIMELINE_STEPS = 100
TIMELINE_KEPT_EVENTS = frozenset(
    {
        "model_error",
        "tool_refused",
        "task_stopped",
        "status",
        "review_requested",
        *("rollback", "retry", "forward", "retry_scheduled", "redispatched"),
    }
)
TIMELINE_KEPT_FAILED_EVENTS = frozenset({"graph_node"})
COLLAPSED_CHECKPOINT_TRIGGERS = frozenset({"task_start", "rollback", "manual", "before_review"})

ROW_STEPS = "steps"
ROW_MODEL = "model"
ROW_HUMAN = "waiting for review"
ROW_HELD = "held"
ROW_BACKOFF = "retry backoff"
ROW_RECOVERY = "recovery"
ROW_CHECKPOINTS = "checkpoints"

# Spans with nothing running are cut out of the axis (a marked break that says how long and
# why), so that a task that waited hours for a review, or sits on hold, still shows its work:
# a span longer than IDLE_GAP_S[1] always, and shorter ones (but never one under IDLE_GAP_S[0])
# longest first, until the work takes at least WORK_SHARE of what stays on the axis.
IDLE_GAP_S = (1.0, 60.0)
WORK_SHARE = 0.15

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

LEVEL_COLORS = {"task": "#7b3fbf", "step": "#2457c5", "tool": "#c77700"}
STATUS_COLORS = {
    ToolCallStatus.SUCCEEDED: "#1e7b34",
    ToolCallStatus.FAILED: "#b3261e",
    ToolCallStatus.TIMED_OUT: "#d9480f",
    ToolCallStatus.UNKNOWN_OUTCOME: "#862e9c",
    ToolCallStatus.RUNNING: "#2457c5",
}
SUPERSEDED_OPACITY = 0.3
# A tick label's length (the whole name is in the hover), an arguments summary's, an error's.
LABEL_CHARS = 40
ARGUMENTS_CHARS = 200
ERROR_CHARS = 200
# Calls the text alternative lists one by one (the newest; the calls tab has them all).
SUMMARY_CALLS = 50
# Checkpoint triggers named after the call they were taken before.
BEFORE_CALL_TRIGGERS = frozenset(
    {"before_write_operation", "before_external_call", "before_review"}
)


def tool_row(name: str) -> str:
    return f"tool · {name}"


def node_row(name: str) -> str:
    return f"node · {name}"


def plotly_escape(text: str) -> str:
    """Text as Plotly shows it literally. Plotly.js reads `<a href>`, `<span style>`, `<br>`
    and entities as markup in hover text, tick labels, legend names and annotations: a tool's
    or an agent's name, an error message or a model-chosen reason could otherwise put a link or
    styling into a chart."""
    return html.escape(text, quote=False)


def plotly_text(texts: list[str]) -> list[str]:
    return [plotly_escape(text) for text in texts]


def plotly_hover(lines: list[str]) -> str:
    """Hover text of several lines: each line escaped, the breaks Plotly's own."""
    return "<br>".join(plotly_escape(line) for line in lines if line)


def plotly_label(text: str, limit: int = LABEL_CHARS) -> str:
    """A tick label: escaped, and cut to `limit` characters."""
    return plotly_escape(text if len(text) <= limit else text[: limit - 1] + "…")


def category_axis(rows: list[str]) -> dict[str, Any]:
    """A category axis of `rows`, first on top: the categories are the escaped names (what the
    traces' `y` hold), the ticks their shortened labels."""
    names = [plotly_escape(row) for row in rows]
    return {
        "type": "category",
        "categoryorder": "array",
        "categoryarray": names[::-1],
        "tickmode": "array",
        "tickvals": names,
        "ticktext": [plotly_label(row) for row in rows],
        "automargin": True,
    }


def short_text(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def duration_text(seconds: float) -> str:
    """0.0712 -> "71 ms", 2.44 -> "2.4 s", 95 -> "1 min 35 s"."""
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else duration_words(seconds)


def call_label(call: dict[str, Any]) -> str:
    """ "write_file #3 (step 2)": the task's third tool call, made in step 2."""
    return f"{call['tool']} #{call['number']} (step {call['step_index']})"


def plotly_time(at: datetime) -> str:
    """`YYYY-MM-DD HH:MM:SS.ffffff` in UTC: Plotly.js dates carry no time zone."""
    if at.utcoffset():
        at = at.astimezone(UTC)
    return at.isoformat(sep=" ", timespec="microseconds")[:26]


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


def _number(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


@dataclass
class _Bars:
    """One bar trace being accumulated."""

    name: str
    color: str | list[str]
    rows: list[str] = field(default_factory=list)
    starts: list[datetime] = field(default_factory=list)
    durations: list[float] = field(default_factory=list)
    hover: list[str] = field(default_factory=list)
    colors: list[str] = field(default_factory=list)
    # Where a click on a bar leads (static/dashboard.js follows `customdata`).
    links: list[str] = field(default_factory=list)

    def add(
        self,
        row: str,
        start: datetime,
        end: datetime,
        hover: list[str],
        color: str = "",
        link: str = "",
    ) -> None:
        end = max(end, start)
        self.rows.append(row)
        self.starts.append(start)
        self.durations.append((end - start).total_seconds() * 1000)
        self.hover.append(plotly_hover(hover))
        self.colors.append(color or str(self.color))
        self.links.append(link)

    def trace(self, superseded: list[tuple[datetime, datetime]]) -> dict[str, Any]:
        opacity = [SUPERSEDED_OPACITY if _within(s, superseded) else 1.0 for s in self.starts]
        return {
            "type": "bar",
            "orientation": "h",
            "name": self.name,
            "y": plotly_text(self.rows),
            "base": [plotly_time(s) for s in self.starts],
            "x": self.durations,
            "hovertext": self.hover,
            "hoverinfo": "text",
            "marker": {"color": self.colors, "opacity": opacity},
            "meta": {"kind": self.name},
            **({"customdata": self.links} if any(self.links) else {}),
        }


def call_link(page: str, call_id: str) -> str:
    """The calls tab of the task page (`page`, its URL) at one call, with its output (the
    click-through). The page's URL is reversed once per timeline, not once per call."""
    query = urlencode({"tab": "calls", "call": call_id})
    return f"{page}?{query}#call-{quote(call_id, safe='')}"


def _within(at: datetime, ranges: list[tuple[datetime, datetime]]) -> bool:
    return any(lo < at < hi for lo, hi in ranges)


def superseded_ranges(checkpoints: list[dict[str, Any]]) -> list[tuple[datetime, datetime]]:
    """Time ranges of abandoned branches: from the checkpoint a run of superseded checkpoints
    forked from, to the next live checkpoint (the rollback's)."""
    ranges = []
    previous_live: datetime | None = None
    run_start: datetime | None = None
    for cp in checkpoints:
        if cp["superseded"]:
            if run_start is None:
                run_start = previous_live or cp["at"]
            continue
        if run_start is not None:
            ranges.append((run_start, cp["at"]))
            run_start = None
        previous_live = cp["at"]
    return ranges


def timeline_from_step(task: Task, *, all_steps: bool) -> int | None:
    """The first step a task's timeline draws in full: None (every step) for a task of at most
    TIMELINE_STEPS steps or when all are asked for."""
    # Steps are numbered from 0 to the current one.
    if all_steps or task.current_step < TIMELINE_STEPS:
        return None
    return task.current_step + 1 - TIMELINE_STEPS


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
    frame = _Frame()
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
    data += _checkpoint_traces(marked, checkpoint_names(marked, events))
    data += _mark_traces(frame.marks)
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
            data = _overview_traces(data, split=plotly_time(collapsed.until))
    breaks = idle_breaks(busy, waits=frame.waits)
    return {
        "data": data,
        "layout": _timeline_layout(frame, rows=rows, busy=busy, breaks=breaks, overview=overview),
        "summary": timeline_summary(frame, checkpoints=checkpoints, collapsed=collapsed),
    }


# The share of the plot's width the overview of collapsed steps takes.
OVERVIEW_WIDTH = 0.22


def _overview_traces(data: list[dict[str, Any]], *, split: str) -> list[dict[str, Any]]:
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


@dataclass(frozen=True)
class Collapsed:
    """The steps before `steps` (their count) are collapsed; the first step shown starts at
    `until`."""

    until: datetime
    steps: int


@dataclass
class _Frame:
    """The timeline being read from the events and the calls: its bars, marks, errors and the
    span of each step."""

    steps_bars: _Bars = field(default_factory=lambda: _Bars("steps", "#8aa1c1"))
    model_bars: _Bars = field(default_factory=lambda: _Bars("model calls", "#5c7cfa"))
    node_bars: _Bars = field(default_factory=lambda: _Bars("graph nodes", "#0b7285"))
    tool_bars: _Bars = field(default_factory=lambda: _Bars("tool attempts", "#1e7b34"))
    waits: dict[str, _Bars] = field(
        default_factory=lambda: {
            ROW_HUMAN: _Bars("waiting for review", "rgba(178,106,0,0.45)"),
            ROW_HELD: _Bars("held", "rgba(91,58,140,0.35)"),
            ROW_BACKOFF: _Bars("retry backoff", "rgba(120,120,120,0.35)"),
        }
    )
    steps: dict[int, list[datetime]] = field(default_factory=dict)
    marks: dict[str, dict[str, list]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )
    errors: dict[str, list] = field(default_factory=lambda: defaultdict(list))
    # Each call's outcome for the text alternative: (label, outcome, attempts, seconds).
    outcomes: list[tuple[str, str, int, float]] = field(default_factory=list)

    def bar_traces(self) -> list[_Bars]:
        return [
            self.steps_bars,
            self.model_bars,
            self.node_bars,
            self.tool_bars,
            *self.waits.values(),
        ]

    def extend_step(self, index: int | None, start: datetime, end: datetime) -> None:
        if index is None or index < 0:
            return
        span = self.steps.setdefault(index, [start, end])
        span[0] = min(span[0], start)
        span[1] = max(span[1], end)

    def error(self, row: str, at: datetime, lines: list[str], link: str = "") -> None:
        self.errors["y"].append(row)
        self.errors["x"].append(at)
        self.errors["text"].append(plotly_hover(lines))
        self.errors["links"].append(link)

    def read_events(self, events: list[dict[str, Any]], *, now: datetime) -> None:
        open_spans: dict[str, datetime] = {}
        for e in events:
            at, kind = iso_datetime(e["at"]), e["type"]
            if kind == "model_decision":
                ms = _number(e["duration_ms"]) or 0.0
                start = at - _ms(ms)
                tokens = int(_number(e["prompt_tokens"]) or 0) + int(
                    _number(e["completion_tokens"]) or 0
                )
                self.model_bars.add(
                    ROW_MODEL,
                    start,
                    at,
                    [
                        f"model turn {e['turn'] or '?'} (step {e['step_index']})",
                        f"{duration_text(ms / 1000)} · {tokens} tokens",
                    ],
                )
                self.extend_step(e["step_index"], start, at)
            elif kind == "step_finished":
                finished = int(_number(e["step"]) or 0) - 1
                self.extend_step(finished, at, at)
            elif kind == "graph_node":
                self._graph_node(e, at)
            elif kind == "model_error":
                self.error(ROW_MODEL, at, [f"model error: {e['error_class'] or ''}"])
            elif kind == "tool_refused":
                self.error(
                    tool_row(e["tool"] or "?"),
                    at,
                    [
                        f"{e['tool'] or '?'} (step {e['step_index']}) refused",
                        f"error: {e['error_class'] or ''}",
                        f"call id {e['call_id']}",
                    ],
                )
            elif kind == "task_stopped":
                self.error(ROW_STEPS, at, [f"task stopped: {e['error_class'] or ''}"])
            elif kind == "status":
                self._status(e, at, open_spans)
            elif kind in RECOVERY_MARKS:
                _mark(self.marks, kind, at, _recovery_text(e))
        for row, start in open_spans.items():
            _close_span(self.waits[row], row, start, now, "still waiting")

    def _graph_node(self, e: dict[str, Any], at: datetime) -> None:
        ms = _number(e["duration_ms"]) or 0.0
        start = at - _ms(ms)
        row = node_row(e["node"] or "?")
        lines = [f"{e['node']} (step {e['step_index']})", duration_text(ms / 1000)]
        if e["tool"]:
            lines.append(f"tools: {e['tool']}")
        self.node_bars.add(row, start, at, lines, "#b3261e" if e["error_class"] else "")
        if e["error_class"]:
            self.error(row, at, [f"{e['node']} failed", f"error: {e['error_class']}"])
        self.extend_step(e["step_index"], start, at)

    def _status(self, e: dict[str, Any], at: datetime, open_spans: dict[str, datetime]) -> None:
        """A wait opens when the task enters its status (the pause) and closes when it leaves
        it (the decision, the release, the end of the backoff)."""
        for state, row in (
            (TaskStatus.WAITING_REVIEW, ROW_HUMAN),
            (TaskStatus.HELD, ROW_HELD),
            (TaskStatus.RETRY_WAIT, ROW_BACKOFF),
        ):
            if e["to"] == state:
                open_spans[row] = at
            elif e["from"] == state and row in open_spans:
                _close_span(
                    self.waits[row], row, open_spans.pop(row), at, e["reason"] or e["to"] or ""
                )
        if e["to"] == TaskStatus.HELD:
            _mark(self.marks, "held", at, f"held: {e['reason'] or ''}"[:300])

    def read_calls(
        self,
        calls: list[dict[str, Any]],
        *,
        task_id: Any,
        now: datetime,
        bars_from_step: int | None = None,
    ) -> None:
        """Each attempt a bar (and a failed one an error mark too); a call of a step before
        `bars_from_step` (collapsed) only its error marks."""
        page = reverse("tasks:detail", args=[task_id])
        for call in calls:
            bars = bars_from_step is None or (call["step_index"] or 0) >= bars_from_step
            row = tool_row(call["tool"])
            link = call_link(page, call["call_id"])
            log = call["attempt_log"] or []
            head = [call_label(call)]
            tail = [
                f"arguments: {short_text(call.get('arguments_text') or '', ARGUMENTS_CHARS)}",
                f"call id {call['call_id']}",
            ]
            seconds = 0.0
            for attempt in log:
                start = iso_datetime(attempt.get("started_at"))
                if start is None:
                    continue
                end = iso_datetime(attempt.get("finished_at")) or start
                status = attempt.get("status", "")
                seconds = (end - start).total_seconds()
                lines = [
                    *head,
                    f"attempt {attempt.get('n', '?')} of {call['attempts']} · {status}"
                    f" · {duration_text(seconds)}",
                    *tail,
                ]
                if attempt.get("error_class"):
                    message = short_text(attempt.get("error_message") or "", ERROR_CHARS)
                    lines.insert(-1, f"error: {attempt['error_class']}: {message}")
                    self.error(row, end, lines, link)
                if not bars:
                    continue
                self.tool_bars.add(
                    row, start, end, lines, STATUS_COLORS.get(status, "#868e96"), link
                )
                self.extend_step(call["step_index"], start, end)
            started = iso_datetime(call["started"])
            running = call["status"] == ToolCallStatus.RUNNING
            if bars and running and started and len(log) < call["attempts"]:
                seconds = (now - started).total_seconds()
                lines = [
                    *head,
                    f"attempt {call['attempts']} · running for {duration_text(seconds)}",
                    *tail,
                ]
                self.tool_bars.add(
                    row, started, now, lines, STATUS_COLORS[ToolCallStatus.RUNNING], link
                )
                self.extend_step(call["step_index"], started, now)
            self.outcomes.append((head[0], call["status"], call["attempts"], seconds))

    def busy(self) -> list[tuple[datetime, datetime]]:
        """What stays on the time axis: the work (a step spans its waits: not work), the marks
        and errors, and where each wait starts and ends — the pause and the decision are
        moments on the axis, never inside a span cut out of it."""
        busy = [
            (start, _end(start, ms))
            for bars in (self.model_bars, self.node_bars, self.tool_bars)
            for start, ms in zip(bars.starts, bars.durations, strict=True)
        ]
        busy += [(x, x) for x in self.errors["x"]]
        busy += [(x, x) for trace in self.marks.values() for x in trace["x"]]
        for bars in self.waits.values():
            for start, ms in zip(bars.starts, bars.durations, strict=True):
                busy += [(start, start), (_end(start, ms), _end(start, ms))]
        return busy


def _timeline_layout(
    frame: _Frame,
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
            "x1": plotly_time(_end(start, ms)),
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
    annotations = [
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
            "title": {"text": "time (UTC)" + (", idle spans cut out" if breaks else "")},
            "rangebreaks": [{"bounds": [plotly_time(b.start), plotly_time(b.end)]} for b in breaks],
            # Plotly pads an autorange by the uncut span: with breaks, the range is set.
            **({"range": _padded_range(busy, breaks)} if breaks else {}),
        },
        "annotations": annotations,
        "yaxis": category_axis(rows),
        "legend": {"orientation": "h", "y": -0.25},
        "shapes": shapes,
    }
    if overview is not None:
        _add_overview(layout, *overview)
    return layout


def _add_overview(
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
        "range": _padded_range(busy, breaks),
        "nticks": 3,
    }
    layout["yaxis"]["anchor"] = "x2"


def timeline_summary(
    frame: _Frame, *, checkpoints: list[dict[str, Any]], collapsed: Collapsed | None = None
) -> dict[str, Any]:
    """The timeline as text, for screen readers: a headline, then each review wait, hold and
    backoff and each call (the newest SUMMARY_CALLS) with its outcome. Of collapsed steps it
    counts only what the timeline keeps of them."""
    failed = sum(1 for _, outcome, _, _ in frame.outcomes if outcome != ToolCallStatus.SUCCEEDED)
    superseded = sum(1 for cp in checkpoints if cp["superseded"])
    headline = (
        f"{_count(len(frame.steps), 'step')}, {_count(len(frame.model_bars.rows), 'model call')}, "
        f"{_count(len(frame.outcomes), 'tool call')} ({failed} not succeeded), "
        f"{_count(len(checkpoints), 'checkpoint')} ({superseded} superseded)"
    )
    items = []
    if collapsed is not None:
        items.append(
            f"steps 0 to {collapsed.steps - 1} are collapsed: only their calls that failed or"
            " were retried, errors, waits, recoveries and key checkpoints are shown"
        )
    for row, bars in frame.waits.items():
        for start, ms in zip(bars.starts, bars.durations, strict=True):
            items.append(
                f"{row} from {plotly_time(start)[:19]} to {plotly_time(_end(start, ms))[:19]}"
                f" UTC ({duration_text(ms / 1000)})"
            )
    shown = frame.outcomes[-SUMMARY_CALLS:]
    if len(frame.outcomes) > len(shown):
        items.append(f"{len(frame.outcomes) - len(shown)} earlier calls are in the calls tab")
    items += [
        f"{label}: {outcome}, {_count(attempts, 'attempt')}, {duration_text(seconds)}"
        for label, outcome, attempts, seconds in shown
    ]
    return {"headline": headline, "items": items}


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def checkpoint_name(cp: dict[str, Any], *, before: str = "") -> str:
    """ "step 4 · before write_file", "step 3 · done", "step 2 · after model", "start"."""
    trigger, step = cp["trigger"] or "", cp["step_index"]
    if trigger == "task_start":
        return "start"
    if trigger == "after_step" and step:
        return f"step {step - 1} · done"  # taken as the next step begins
    if before and trigger in BEFORE_CALL_TRIGGERS:
        return f"step {step} · before {before}"
    return f"step {step} · {trigger.replace('_', ' ')}"


def checkpoint_names(
    checkpoints: list[dict[str, Any]], events: list[dict[str, Any]]
) -> dict[Any, str]:
    """Each checkpoint's name; one taken before a call is named after that call's tool: the
    call whose start (or review request) in the same step came last before it."""
    moments = sorted(
        (
            (iso_datetime(e["at"]), e["step_index"], e["tool"] or "")
            for e in events
            if e["type"] in ("tool_started", "review_requested") and e["at"]
        ),
        key=lambda moment: moment[0],
    )
    names = {}
    for cp in checkpoints:
        before = ""
        if cp["trigger"] in BEFORE_CALL_TRIGGERS and cp["at"] is not None:
            at = bisect.bisect_right(moments, cp["at"], key=lambda moment: moment[0])
            if at and moments[at - 1][1] == cp["step_index"]:
                before = moments[at - 1][2]
        names[cp["id"]] = checkpoint_name(cp, before=before)
    return names


@dataclass
class IdleBreak:
    """A span cut out of the time axis: nothing ran from `start` to `end`."""

    start: datetime
    end: datetime
    label: str


def idle_breaks(
    busy: list[tuple[datetime, datetime]],
    *,
    waits: dict[str, _Bars],
    long_only: bool = False,
) -> list[IdleBreak]:
    """The idle spans (no model call, tool attempt, checkpoint or mark) longer than the
    IDLE_GAP_S threshold, each labelled with its length and what the task was waiting for.
    A little of each span's edges stays on the axis so the work around it is readable.
    `long_only`: only the spans longer than IDLE_GAP_S[1] (the overview of collapsed steps,
    where little but marks is drawn)."""
    spans = sorted(busy)
    if not spans:
        return []
    merged = [list(spans[0])]
    for start, end in spans[1:]:
        if start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    worked = sum((end - start).total_seconds() for start, end in merged)
    shortest, longest = IDLE_GAP_S
    # The edges kept of each cut span: a twentieth of the work, between 10 ms and 5 s.
    pad_s = min(5.0, max(0.01, worked * 0.05))
    gaps = sorted(
        ((a[1], b[0]) for a, b in zip(merged, merged[1:], strict=False)),
        key=lambda gap: gap[1] - gap[0],
        reverse=True,
    )
    shown = (merged[-1][1] - merged[0][0]).total_seconds()
    cut = []
    if long_only:
        shortest = longest
    for start, end in gaps:
        seconds = (end - start).total_seconds()
        if seconds <= shortest or (seconds <= longest and worked >= WORK_SHARE * shown):
            break
        cut.append((start, end))
        shown -= seconds - 2 * pad_s
    pad = _ms(pad_s * 1000)
    return [
        IdleBreak(start + pad, end - pad, _gap_label(start, end, waits))
        for start, end in sorted(cut)
    ]


def _gap_label(start: datetime, end: datetime, waits: dict[str, _Bars]) -> str:
    """ "⋯ 4 h 0 min waiting for review ⋯": the wait that covers most of the gap, else idle."""
    best, covered = "idle", 0.0
    for row, bars in waits.items():
        for s, ms in zip(bars.starts, bars.durations, strict=True):
            overlap = (min(end, _end(s, ms)) - max(start, s)).total_seconds()
            if overlap > covered:
                best, covered = row, overlap
    return f"⋯ {duration_words((end - start).total_seconds())} {best} ⋯"


def _padded_range(busy: list[tuple[datetime, datetime]], breaks: list[IdleBreak]) -> list[str]:
    lo, hi = min(s for s, _ in busy), max(e for _, e in busy)
    cut = sum((b.end - b.start).total_seconds() for b in breaks)
    pad = _ms(min(5.0, max(0.01, ((hi - lo).total_seconds() - cut) * 0.02)) * 1000)
    return [plotly_time(lo - pad), plotly_time(hi + pad)]


def duration_words(seconds: float) -> str:
    """14460 -> "4 h 1 min", 95 -> "1 min 35 s", 2.44 -> "2.4 s"."""
    if seconds < 9.95:
        return f"{seconds:.1f} s"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"


def _mark(marks: dict[str, dict[str, list]], kind: str, at: datetime, text: str) -> None:
    name = RECOVERY_MARKS[kind][0]
    marks[name]["x"].append(at)
    marks[name]["text"].append(text)
    marks[name]["kind"].append(kind)


def _recovery_text(e: dict[str, Any]) -> str:
    kind = e["type"]
    who = f" by {e['actor']}" if e.get("actor") else ""
    why = f": {e['reason']}" if e.get("reason") else ""
    if kind in ("rollback", "retry", "forward") and e.get("from_seq") is not None:
        return f"{kind} to checkpoint #{e['from_seq']}{who}{why}"[:300]
    if kind == "retry_scheduled":
        return f"retry scheduled after {e.get('error_class') or 'an error'}"[:300]
    return f"{kind.replace('_', ' ')}{who}{why}"[:300]


def _mark_traces(marks: dict[str, dict[str, list]]) -> list[dict[str, Any]]:
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


def _ms(value: float) -> timedelta:
    return timedelta(milliseconds=value)


def _end(start: datetime, duration_ms: float) -> datetime:
    return start + _ms(duration_ms)


def _close_span(bars: _Bars, row: str, start: datetime, end: datetime, how: str) -> None:
    seconds = (end - start).total_seconds()
    bars.add(
        row,
        start,
        end,
        [
            f"{row} · {duration_text(seconds)}",
            f"from {plotly_time(start)[11:23]} to {plotly_time(end)[11:23]} UTC",
            how,
        ],
    )


def _checkpoint_traces(
    checkpoints: list[dict[str, Any]], names: dict[Any, str]
) -> list[dict[str, Any]]:
    groups: dict[tuple[str, bool], list[dict[str, Any]]] = defaultdict(list)
    for cp in checkpoints:
        groups[(cp["level"], cp["superseded"])].append(cp)
    traces = []
    for (level, superseded), marks in sorted(groups.items()):
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": f"checkpoints · {level}" + (" (superseded)" if superseded else ""),
                "y": [ROW_CHECKPOINTS] * len(marks),
                "x": [plotly_time(cp["at"]) for cp in marks],
                "hovertext": [
                    plotly_hover(
                        [
                            names[cp["id"]],
                            f"checkpoint #{cp['seq']} · {cp['level']} · {cp['trigger']}",
                            f"id {cp['id']}",
                            "superseded by a rollback" if superseded else "",
                        ]
                    )
                    for cp in marks
                ],
                "hoverinfo": "text",
                "marker": {
                    "symbol": "diamond",
                    "size": 9,
                    "color": LEVEL_COLORS.get(level, "#444"),
                    "opacity": SUPERSEDED_OPACITY if superseded else 1.0,
                },
                "meta": {"kind": "checkpoints", "level": level, "superseded": superseded},
            }
        )
    return traces
