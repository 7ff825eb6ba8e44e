"""Idle breaks: the spans with nothing running, cut out of the time axis (IdleBreak), each
labelled with its length and what the task waited for; the padded range of what stays."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from tasks.charts.bars import Bars
from tasks.charts.formatting import duration_words, milliseconds, plotly_time, span_end

# Spans with nothing running are cut out of the axis (a marked break that says how long and
# why), so that a task that waited hours for a review, or sits on hold, still shows its work:
# a span longer than IDLE_GAP_S[1] always, and shorter ones (but never one under IDLE_GAP_S[0])
# longest first, until the work takes at least WORK_SHARE of what stays on the axis.
IDLE_GAP_S = (1.0, 60.0)
WORK_SHARE = 0.15


@dataclass
class IdleBreak:
    """A span cut out of the time axis: nothing ran from `start` to `end`."""

    start: datetime
    end: datetime
    label: str


def idle_breaks(
    busy: list[tuple[datetime, datetime]],
    *,
    waits: dict[str, Bars],
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
    pad = milliseconds(pad_s * 1000)
    return [
        IdleBreak(start + pad, end - pad, _gap_label(start, end, waits))
        for start, end in sorted(cut)
    ]


def _gap_label(start: datetime, end: datetime, waits: dict[str, Bars]) -> str:
    """ "⋯ 4 h 0 min waiting for review ⋯": the wait that covers most of the gap, else idle."""
    best, covered = "idle", 0.0
    for row, bars in waits.items():
        for s, ms in zip(bars.starts, bars.durations, strict=True):
            overlap = (min(end, span_end(s, ms)) - max(start, s)).total_seconds()
            if overlap > covered:
                best, covered = row, overlap
    return f"⋯ {duration_words((end - start).total_seconds())} {best} ⋯"


def padded_range(busy: list[tuple[datetime, datetime]], breaks: list[IdleBreak]) -> list[str]:
    lo, hi = min(s for s, _ in busy), max(e for _, e in busy)
    cut = sum((b.end - b.start).total_seconds() for b in breaks)
    pad = milliseconds(min(5.0, max(0.01, ((hi - lo).total_seconds() - cut) * 0.02)) * 1000)
    return [plotly_time(lo - pad), plotly_time(hi + pad)]
