"""Figure data for the review SLA page (`/stats/reviews/`): the time to decision over the
window against its target, and the reviews opened, decided late and still open, per hour or
UTC day (review.rollups.review_sla_series). Drawn under the viewer's time zone (plotly_time),
which the axis titles name."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from dashboard.charts import figure, layout, time_range
from dashboard.windows import Window
from tasks.charts.formatting import duration_words, plotly_time, time_zone_name

BREACH = "#b3261e"


def _x_axis(series: list[dict[str, Any]], window: Window) -> dict[str, Any]:
    step = timedelta(hours=1) if window.bucket == "hour" else timedelta(days=1)
    return {
        "type": "date",
        "title": {"text": f"reviews opened, by {window.bucket} ({time_zone_name()})"},
        "range": time_range([row["bucket"] for row in series], window, step),
    }


def _minutes(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds / 60, 2)


def review_decision_time_figure(
    series: list[dict[str, Any]], window: Window, *, target_s: float
) -> dict[str, Any]:
    """p50 and p95 minutes to decision per bucket, marked red where the bucket has breaches
    (each review against its own rules' target), and the default target as a dashed line."""
    decided = [row for row in series if row["decision_p50_s"] is not None]
    x = [plotly_time(row["bucket"]) for row in decided]
    late = [row["breached"] for row in decided]
    data: list[dict[str, Any]] = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": "p50",
            "x": x,
            "y": [_minutes(row["decision_p50_s"]) for row in decided],
            "text": [duration_words(row["decision_p50_s"]) for row in decided],
            "hoverinfo": "text+x+name",
            "marker": {"color": "#5c7cfa"},
        },
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": "p95",
            "x": x,
            "y": [_minutes(row["decision_p95_s"]) for row in decided],
            "text": [
                duration_words(row["decision_p95_s"])
                + (f" ({over} past the target)" if over else "")
                for row, over in zip(decided, late, strict=True)
            ],
            "hoverinfo": "text+x+name",
            "marker": {
                "color": [BREACH if over else "#c77700" for over in late],
                "size": [11 if over else 6 for over in late],
            },
            "line": {"color": "#c77700"},
        },
    ]
    if decided:
        x_range = _x_axis(series, window)["range"]
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"default target {duration_words(target_s)}",
                "x": x_range,
                "y": [_minutes(target_s)] * 2,
                "hoverinfo": "name",
                "line": {"color": BREACH, "dash": "dash"},
            }
        )
    top = max((y for trace in data for y in trace["y"] if y is not None), default=0)
    return figure(
        data,
        layout(
            xaxis=_x_axis(series, window),
            yaxis={"title": {"text": "minutes to decision"}, "range": [0, top * 1.15 or 1]},
            legend={"orientation": "h", "y": -0.35},
        ),
    )


def review_backlog_figure(series: list[dict[str, Any]], window: Window) -> dict[str, Any]:
    """Reviews opened per bucket, those decided or expired past their target, and those still
    open."""
    x = [plotly_time(row["bucket"]) for row in series]
    return figure(
        [
            {
                "type": "bar",
                "name": name,
                "x": x,
                "y": [row[key] for row in series],
                "marker": {"color": color},
            }
            for key, name, color in (
                ("opened", "opened", "#5c7cfa"),
                ("breached", "past the target", BREACH),
                ("still_open", "still open", "#b26a00"),
            )
        ],
        layout(
            barmode="group",
            xaxis=_x_axis(series, window),
            yaxis={"title": {"text": "reviews"}, "rangemode": "tozero"},
            legend={"orientation": "h", "y": -0.35},
        ),
    )
