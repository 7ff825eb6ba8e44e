"""The timeline as text, for screen readers: a headline, then each wait and each call with
its outcome."""

from __future__ import annotations

from typing import Any

from tasks.charts.formatting import duration_text, plotly_time, span_end, time_zone_name
from tasks.charts.frame import Collapsed, Frame
from tasks.charts.layout import PHASE_LABELS
from tasks.models import ToolCallStatus

# Calls the text alternative lists one by one (the newest; the calls tab has them all).
SUMMARY_CALLS = 50


def timeline_summary(
    frame: Frame, *, checkpoints: list[dict[str, Any]], collapsed: Collapsed | None = None
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
    items += [
        f"{PHASE_LABELS.get(phase, phase)} from {plotly_time(at)[:19]} {time_zone_name()}"
        for at, phase in frame.phases
    ]
    for row, bars in frame.waits.items():
        for start, ms in zip(bars.starts, bars.durations, strict=True):
            items.append(
                f"{row} from {plotly_time(start)[:19]} to {plotly_time(span_end(start, ms))[:19]}"
                f" {time_zone_name()} ({duration_text(ms / 1000)})"
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
