"""A bar trace being accumulated (Bars): one bar per span, on a row of the timeline, with
its hover text, colour and click-through; bars inside a span a rollback superseded are faded."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tasks.charts.formatting import plotly_hover, plotly_text, plotly_time
from tasks.charts.legend import SUPERSEDED_OPACITY


@dataclass
class Bars:
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


def _within(at: datetime, ranges: list[tuple[datetime, datetime]]) -> bool:
    return any(lo < at < hi for lo, hi in ranges)
