"""Text, times and durations as Plotly shows them: escaping (Plotly.js reads markup in labels
and hover text), shortened tick labels, a category axis, dates without a time zone, durations in
words, and the millisecond arithmetic of bars (a start and a duration in ms). Shared by every
chart of the site (dashboard.charts, multiagent.charts)."""

from __future__ import annotations

import html
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

# A tick label's length (the whole name is in the hover).
LABEL_CHARS = 40


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


def plotly_time(at: datetime) -> str:
    """`YYYY-MM-DD HH:MM:SS.ffffff` in the current time zone (UTC unless the chart is drawn
    under `timezone.override` of the user's zone): Plotly.js dates carry no time zone."""
    if timezone.is_aware(at):
        at = timezone.localtime(at)
    return at.isoformat(sep=" ", timespec="microseconds")[:26]


def time_zone_name() -> str:
    """The zone plotly_time writes times in, as axis titles and hover texts name it."""
    return timezone.get_current_timezone_name()


def milliseconds(value: float) -> timedelta:
    return timedelta(milliseconds=value)


def span_end(start: datetime, duration_ms: float) -> datetime:
    return start + milliseconds(duration_ms)
