"""Tool and agent names are shown, never read as markup, wherever Plotly prints them: the
timeline's and the group timeline's tick labels and hover (headless Chromium against the live
server), and the statistics charts' ticks, legend, pie labels and hover (figure data). Plotly
reads `<a href>`, `<b>` and `<span style>` in all of those."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from dashboard import charts as stats_charts
from dashboard.windows import Window
from tasks.charts import plotly_escape
from tasks.models import TaskEvent
from tests.conftest import needs_chromium
from tests.factories import TaskFactory, ToolCallFactory

NAME = '<a href="//evil.example">x</a><b>y</b>'

# Links or bold text of the name's making in a chart, and its tick labels' text.
RENDERED = """(id) => {
  const svg = document.getElementById(id);
  const bold = Array.from(svg.querySelectorAll('tspan'), (t) => t.style.fontWeight);
  return {
    links: svg.querySelectorAll('svg a').length,
    bold: bold.filter((w) => w === 'bold').length,
    ticks: Array.from(svg.querySelectorAll('.ytick text'), (t) => t.textContent),
  };
}"""
HOVER = """() => {
  const el = document.getElementById('timeline');
  const curve = el.data.findIndex((t) => t.name === 'tool attempts');
  Plotly.Fx.hover(el, [{curveNumber: curve, pointNumber: 0}]);
  const layer = document.querySelector('#timeline .hoverlayer');
  return {text: layer.textContent, links: layer.querySelectorAll('a').length};
}"""


def group_with_hostile_names():
    """A parent and its sub-agent `NAME`, which called the tool `NAME` (failed with `NAME`)."""
    now = timezone.now()
    parent = TaskFactory(status="waiting_children")
    child = TaskFactory(status="failed", parent=parent, agent_name=NAME)
    for task in (parent, child):
        for seconds, frm, to in ((0, "queued", "running"), (4, "running", "failed")):
            TaskEvent.objects.create(
                task=task,
                type="status",
                payload={"from": frm, "to": to},
                created_at=now - timedelta(seconds=10 - seconds),
            )
    ToolCallFactory(
        task=child,
        tool=NAME,
        status="failed",
        attempts=1,
        arguments={"path": NAME},
        attempt_log=[
            {
                "n": 1,
                "status": "failed",
                "started_at": (now - timedelta(seconds=9)).isoformat(),
                "finished_at": (now - timedelta(seconds=8)).isoformat(),
                "error_class": "permanent",
                "error_message": NAME,
            }
        ],
    )
    return child


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@needs_chromium
def test_tool_and_agent_names_in_tick_labels_and_hover_are_text(open_page, operator):
    child = group_with_hostile_names()
    page = open_page(operator, f"/tasks/{child.id}/", timeout_ms=60_000)
    page.wait_for_selector("#timeline[data-ready='1']")
    page.wait_for_selector("#group-lanes[data-ready='1']")
    for chart in ("timeline", "group-lanes"):
        rendered = page.evaluate(RENDERED, chart)
        assert rendered["links"] == 0 and rendered["bold"] == 0, (chart, rendered)
        assert any('<a href="//evil.example">x</a>' in tick for tick in rendered["ticks"]), (
            chart,
            rendered,
        )
    hovered = page.evaluate(HOVER)
    assert hovered["links"] == 0, hovered
    assert f"{NAME} #1 (step 0)" in hovered["text"]
    assert f"error: permanent: {NAME}" in hovered["text"]


def test_statistics_charts_escape_tool_names_and_error_classes():
    now = timezone.now()
    window = Window(since=now - timedelta(days=1), until=now, bucket="hour", label="24h")
    row = {"tool": NAME, "calls": 2, "failed": 1, "rate": 0.5}
    shown = plotly_escape(NAME)
    by_tool = stats_charts.failure_rate_by_tool_figure([row])["data"][0]
    assert by_tool["x"] == [shown]
    assert "%3Cb%3Ey%3C%2Fb%3E" in by_tool["customdata"][0]  # the filter names the tool itself
    over_time = stats_charts.failure_rate_over_time_figure(
        [{**row, "bucket": now - timedelta(hours=1)}], window
    )["data"][0]
    assert over_time["name"] == shown and over_time["text"][0].startswith(shown)
    mix = stats_charts.error_class_mix_figure([{"error_class": NAME, "tasks": 1}], window)
    assert mix["data"][0]["labels"] == [shown]
    heatmap = stats_charts.error_heatmap_figure([{"tool": NAME, "error_class": NAME, "failed": 1}])[
        "data"
    ][0]
    assert heatmap["x"] == [shown] and heatmap["y"] == [shown]
    durations = stats_charts.duration_percentiles_figure([{"tool": NAME, "p50_ms": 1, "p95_ms": 2}])
    assert {tuple(trace["x"]) for trace in durations["data"]} == {(shown,)}
    outcomes = stats_charts.review_outcomes_figure(
        [{"tool": NAME, **dict.fromkeys(stats_charts.OUTCOME_COLORS, 1)}]
    )
    assert {tuple(trace["x"]) for trace in outcomes["data"]} == {(shown,)}
