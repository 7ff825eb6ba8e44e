"""The timeline being read (Frame): the events (model calls, graph nodes, errors, waits,
recoveries) and the tool calls' attempt logs become bars, marks and errors, and each step's
span; Collapsed says which steps are drawn only in overview."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlencode

from django.urls import reverse

from tasks.charts.bars import Bars
from tasks.charts.formatting import (
    duration_text,
    milliseconds,
    plotly_hover,
    plotly_time,
    short_text,
    span_end,
    time_zone_name,
)
from tasks.charts.legend import (
    ARGUMENTS_CHARS,
    ERROR_CHARS,
    ROW_BACKOFF,
    ROW_HELD,
    ROW_HUMAN,
    ROW_MODEL,
    ROW_STEPS,
    STATUS_COLORS,
    node_row,
    tool_row,
)
from tasks.charts.marks import RECOVERY_MARKS, mark_add, recovery_text
from tasks.models import ToolCallStatus
from tasks.selectors.event_fields import iso_datetime
from tasks.states import TaskStatus


def _number(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def call_label(call: dict[str, Any]) -> str:
    """ "write_file #3 (step 2)": the task's third tool call, made in step 2."""
    return f"{call['tool']} #{call['number']} (step {call['step_index']})"


def call_link(page: str, call_id: str) -> str:
    """The calls tab of the task page (`page`, its URL) at one call, with its output (the
    click-through). The page's URL is reversed once per timeline, not once per call."""
    query = urlencode({"tab": "calls", "call": call_id})
    return f"{page}?{query}#call-{quote(call_id, safe='')}"


def _close_span(bars: Bars, row: str, start: datetime, end: datetime, how: str) -> None:
    seconds = (end - start).total_seconds()
    bars.add(
        row,
        start,
        end,
        [
            f"{row} · {duration_text(seconds)}",
            f"from {plotly_time(start)[11:23]} to {plotly_time(end)[11:23]} {time_zone_name()}",
            how,
        ],
    )


@dataclass(frozen=True)
class Collapsed:
    """The steps before `steps` (their count) are collapsed; the first step shown starts at
    `until`."""

    until: datetime
    steps: int


@dataclass
class Frame:
    """The timeline being read from the events and the calls: its bars, marks, errors and the
    span of each step.

    Past ~150 lines on purpose: one reader per source (read_events with its _graph_node and
    _status, read_calls), each short, all filling the same accumulators; split apart they
    would only pass the frame around."""

    steps_bars: Bars = field(default_factory=lambda: Bars("steps", "#8aa1c1"))
    model_bars: Bars = field(default_factory=lambda: Bars("model calls", "#5c7cfa"))
    node_bars: Bars = field(default_factory=lambda: Bars("graph nodes", "#0b7285"))
    tool_bars: Bars = field(default_factory=lambda: Bars("tool attempts", "#1e7b34"))
    waits: dict[str, Bars] = field(
        default_factory=lambda: {
            ROW_HUMAN: Bars("waiting for review", "rgba(178,106,0,0.45)"),
            ROW_HELD: Bars("held", "rgba(91,58,140,0.35)"),
            ROW_BACKOFF: Bars("retry backoff", "rgba(120,120,120,0.35)"),
        }
    )
    steps: dict[int, list[datetime]] = field(default_factory=dict)
    marks: dict[str, dict[str, list[Any]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )
    errors: dict[str, list[Any]] = field(default_factory=lambda: defaultdict(list))
    # Each call's outcome for the text alternative: (label, outcome, attempts, seconds).
    outcomes: list[tuple[str, str, int, float]] = field(default_factory=list)
    # A plan task's phases, each from its first pick-up: (when, "plan" | "execution").
    phases: list[tuple[datetime, str]] = field(default_factory=list)

    def bar_traces(self) -> list[Bars]:
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
            if at is None:  # every event has its time
                continue
            if kind == "model_decision":
                ms = _number(e["duration_ms"]) or 0.0
                start = at - milliseconds(ms)
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
            elif kind == "task_started" and e.get("plan"):
                if not self.phases or self.phases[-1][1] != e["plan"]:
                    self.phases.append((at, str(e["plan"])))
            elif kind == "status":
                self._status(e, at, open_spans)
            elif kind in RECOVERY_MARKS:
                mark_add(self.marks, kind, at, recovery_text(e))
        for row, start in open_spans.items():
            _close_span(self.waits[row], row, start, now, "still waiting")

    def _graph_node(self, e: dict[str, Any], at: datetime) -> None:
        ms = _number(e["duration_ms"]) or 0.0
        start = at - milliseconds(ms)
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
            mark_add(self.marks, "held", at, f"held: {e['reason'] or ''}"[:300])

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
            if not log and call["status"] in (ToolCallStatus.REJECTED, ToolCallStatus.DENIED):
                # Never ran, so no bar: a mark in its lane where it was refused says so.
                at = iso_datetime(call.get("settled")) or iso_datetime(call.get("proposed"))
                if at is not None:
                    self.error(row, at, [*head, f"{call['status']}: it never ran", *tail], link)
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
            (start, span_end(start, ms))
            for bars in (self.model_bars, self.node_bars, self.tool_bars)
            for start, ms in zip(bars.starts, bars.durations, strict=True)
        ]
        busy += [(x, x) for x in self.errors["x"]]
        busy += [(x, x) for trace in self.marks.values() for x in trace["x"]]
        for bars in self.waits.values():
            for start, ms in zip(bars.starts, bars.durations, strict=True):
                busy += [(start, start), (span_end(start, ms), span_end(start, ms))]
        return busy
