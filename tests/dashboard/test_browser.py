"""In headless Chromium: log in, open a task, read the timeline's Plotly traces, filter the
checkpoint levels, see the statistics charts render, and see that a viewer gets no buttons."""

from __future__ import annotations

from django.utils import timezone

from tests.conftest import BROWSER
from tests.factories import TaskFactory

pytestmark = BROWSER

TRACE_NAMES = "Array.from(document.getElementById('timeline').data, t => t.name)"


def test_operator_sees_the_timeline_and_the_statistics_charts(
    live_server, open_page, run_task, operator
):
    task = run_task(
        [
            {"call": "write_file", "args": {"path": "a.txt", "content": "hi"}},
            {"call": "read_file", "args": {"path": "missing.txt"}},
            {"final": "done"},
        ],
        ["write_file", "read_file"],
    )
    page = open_page(operator, f"/tasks/{task.id}/")
    page.wait_for_selector("#timeline[data-ready='1']")
    names = page.evaluate(TRACE_NAMES)
    assert {
        "steps",
        "model calls",
        "tool attempts",
        "errors",
        "checkpoints · task",
        "checkpoints · step",
        "checkpoints · tool",
    } <= set(names)
    bars = page.evaluate(
        "document.getElementById('timeline').data.find(t => t.name === 'tool attempts').y"
    )
    assert bars == ["tool · write_file", "tool · read_file"]

    page.uncheck("[data-level-filter=timeline] input[value=step]")
    visible = page.evaluate(
        "Object.fromEntries(Array.from(document.getElementById('timeline')"
        ".data, t => [t.name, t.visible]))"
    )
    assert visible["checkpoints · step"] is False
    assert visible["checkpoints · task"] is not False

    page.click("[data-tab=calls]")
    page.wait_for_selector("[data-testid=tab-calls]")
    assert "missing.txt: no such file" in page.inner_text("#tab-body")
    assert page.is_visible("[data-testid=cancel-button]") is False  # finished: nothing to cancel

    page.goto(f"{live_server.url}/stats/failures/")
    for chart in ("by-tool", "by-step", "heatmap", "retries", "durations", "reviews"):
        page.wait_for_selector(f"#chart-{chart}[data-ready='1']")
    tools = page.evaluate("document.getElementById('chart-by-tool').data[0].x")
    assert sorted(tools) == ["read_file", "write_file"]
    assert page.evaluate("document.getElementById('chart-heatmap').data[0].type") == "heatmap"


def test_a_viewer_sees_no_action_buttons(live_server, open_page, viewer):
    task = TaskFactory(status="running")
    page = open_page(viewer, "/tasks/")
    assert page.query_selector("[data-testid=bulk-form]") is None
    assert page.query_selector("input[name=ids]") is None
    page.goto(f"{live_server.url}/tasks/{task.id}/")
    page.wait_for_selector("#timeline[data-ready='1']")
    assert page.query_selector("[data-testid=task-actions]") is None
    assert page.query_selector("#task-live[data-live=on]") is not None
    assert page.query_selector("button.danger") is None


# Each chart is drawn, and by a trace module the Plotly bundle has: a trace type the bundle
# lacks is left out of `_fullData`'s modules (drawn as nothing) instead of failing.
CHARTS_DRAWN = """ids => ids.map(id => {
  const el = document.getElementById(id);
  return [id, el.dataset.ready === "1" && el._fullData.length > 0
    && el._fullData.every(t => t._module) && !!el.querySelector(".main-svg")];
})"""


def test_only_the_chart_pages_load_plotly_and_every_chart_draws(
    live_server, open_page, run_task, operator
):
    task = run_task(
        [
            {"call": "write_file", "args": {"path": "a.txt", "content": "hi"}},
            {"call": "read_file", "args": {"path": "missing.txt"}},
            {"final": "done"},
        ],
        ["write_file", "read_file"],
    )
    TaskFactory(status="failed", error_class="timeout", finished_at=timezone.now())
    loaded = "performance.getEntriesByType('resource').map(e => e.name)"

    # Room for a loaded machine: the statistics page draws seven charts.
    page = open_page(operator, "/tasks/", timeout_ms=60_000)
    page.wait_for_load_state("load")
    assert page.evaluate("typeof window.Plotly") == "undefined"
    assert not [url for url in page.evaluate(loaded) if "plotly" in url]

    pages = {
        "/": ["chart-failure-rate", "chart-error-mix"],
        f"/tasks/{task.id}/": ["timeline"],
        "/stats/failures/": [
            "chart-by-tool",
            "chart-by-step",
            "chart-over-time",
            "chart-heatmap",
            "chart-retries",
            "chart-durations",
            "chart-reviews",
        ],
    }
    for path, charts in pages.items():
        page.goto(f"{live_server.url}{path}")
        for chart in charts:
            page.wait_for_selector(f"#{chart}[data-ready='1']")
        assert dict(page.evaluate(CHARTS_DRAWN, charts)) == dict.fromkeys(charts, True), path
        assert [url for url in page.evaluate(loaded) if "plotly" in url]
