"""The timeline tells the truth, in headless Chromium against the live server and real
rqworkers: after an approval the review band starts at the pause (not at the task's start),
a window resize redraws the chart inside its box without covering the tabs below, hover names
a failed call with its attempt and escaped error, after a group rollback the group
timeline's labels do not print over each other, and a long task's collapsed timeline shows
all its steps on request."""

from __future__ import annotations

import pytest

from multiagent.models import GlobalCheckpoint
from multiagent.recovery import group_rollback
from review.models import ReviewRequest
from tasks import charts
from tasks.charts import plotly_time
from tasks.models import Task, TaskEvent
from tests.conftest import BROWSER, approve, wait_for
from tests.factories import run_in_process, scripted_task
from tests.multiagent.conftest import agent, delegate, group_spec

pytestmark = [*BROWSER, pytest.mark.integration]

# The rendered review band (a filled rect path) and each bar of a trace, as page boxes.
BAND_BOX = """() => {
  const rects = Array.from(document.querySelectorAll('#timeline .shapelayer path'))
    .filter((p) => p.getAttribute('d').endsWith('Z'));
  return rects.map((p) => p.getBoundingClientRect().toJSON());
}"""
BAR_BOXES = """(name) => {
  const el = document.getElementById('timeline');
  const bars = el.data.filter((t) => t.type === 'bar');
  const index = bars.findIndex((t) => t.name === name);
  const trace = document.querySelectorAll('#timeline .barlayer .trace')[index];
  const paths = trace.querySelectorAll('.point path');
  return Array.from(paths, (p) => p.getBoundingClientRect().toJSON());
}"""
# Redrawn for the container's width (Plotly's responsive handler runs after a debounce). Plotly
# sizes to the box's outer width (its border included; .chart clips that sliver), which is
# fractional where the layout is: compare the two boxes, not the rounded clientWidth.
FITTED = """(id) => {
  const el = document.getElementById(id);
  const svg = el.querySelector('svg.main-svg');
  return svg && Math.abs(svg.getBoundingClientRect().width - el.getBoundingClientRect().width) < 1;
}"""
# Every text the group timeline prints (tick labels, bar labels, annotations, legend), as boxes.
TEXT_BOXES = """() => Array.from(document.querySelectorAll('#group-lanes svg text'))
  .filter((t) => t.textContent.trim() && getComputedStyle(t).display !== 'none'
                 && getComputedStyle(t).visibility !== 'hidden'
                 && t.getAttribute('opacity') !== '0')
  .map((t) => ({text: t.textContent, box: t.getBoundingClientRect().toJSON()}))
  .filter((t) => t.box.width > 0 && t.box.height > 0)"""
HOVER = """(needle) => {
  const el = document.getElementById('timeline');
  const curve = el.data.findIndex((t) => t.name === 'tool attempts');
  const point = el.data[curve].hovertext.findIndex((text) => text.includes(needle));
  Plotly.Fx.hover(el, [{curveNumber: curve, pointNumber: point}]);
  const layer = document.querySelector('#timeline .hoverlayer');
  const bold = Array.from(layer.querySelectorAll('tspan'), (t) => t.style.fontWeight);
  const markup = layer.querySelectorAll('a').length + bold.filter((w) => w === 'bold').length;
  return {text: layer.textContent, markup: markup};
}"""


def overlap(a: dict, b: dict) -> bool:
    return (
        a["left"] < b["right"] - 0.5
        and b["left"] < a["right"] - 0.5
        and a["top"] < b["bottom"] - 0.5
        and b["top"] < a["bottom"] - 0.5
    )


def assert_chart_clear_of_tabs(page) -> None:
    chart = page.locator("#timeline").bounding_box()
    svg = page.locator("#timeline svg.main-svg").first.bounding_box()
    tabs = page.locator("[data-testid=tabs]").bounding_box()
    assert chart["y"] + chart["height"] <= tabs["y"], (chart, tabs)
    assert svg["y"] + svg["height"] <= tabs["y"] + 0.5, (svg, tabs)


@pytest.fixture
def worker(worker_pool):
    """One real rqworker; a loaded machine may take a while to start it."""
    worker_pool.start(1, timeout=180)
    return worker_pool


def test_after_an_approval_the_review_band_starts_at_the_pause_and_resizing_keeps_the_tabs_clear(
    live_server, worker, open_page, operator
):
    task = scripted_task(
        [
            {"call": "write_file", "args": {"path": "a.txt", "content": "hi"}},
            {"call": "read_file", "args": {"path": "missing<b>x</b>.txt"}},
            {"call": "delete_file", "args": {"path": "old.log"}},
            {"final": "done"},
        ],
        ["write_file", "read_file", "delete_file"],
        enqueue=True,
        user=operator,
        workspace={"files": {"old.log": "stale\n"}},
    )
    review = wait_for(lambda: ReviewRequest.objects.filter(task=task, status="pending").first(), 90)
    approve(review, operator)
    wait_for(lambda: Task.objects.get(id=task.id).status == "succeeded", 90)
    pause = TaskEvent.objects.get(task=task, type="status", payload__to="waiting_review")
    decision = TaskEvent.objects.get(task=task, type="status", payload__from="waiting_review")

    page = open_page(
        operator, f"/tasks/{task.id}/", viewport={"width": 1280, "height": 900}, timeout_ms=60_000
    )
    page.wait_for_selector("#timeline[data-ready='1']")
    shapes = page.evaluate("document.getElementById('timeline').layout.shapes")
    (band,) = [s for s in shapes if s["type"] == "rect"]
    assert band["x0"] == plotly_time(pause.created_at)
    assert band["x1"] == plotly_time(decision.created_at)

    # As drawn: the band begins after the calls made before the pause, and before the call
    # that waited for it.
    (drawn,) = page.evaluate(BAND_BOX)
    write, read, delete = page.evaluate(BAR_BOXES, "tool attempts")
    plot = page.locator("#timeline .nsewdrag").first.bounding_box()
    assert drawn["left"] >= plot["x"]
    assert drawn["left"] >= max(write["right"], read["right"]) - 0.5
    assert drawn["right"] <= delete["left"] + 0.5
    assert "waiting for review" in page.inner_text("[data-testid=timeline-text]")

    # The failed read: its hover names the call, the attempt and the error, as text.
    hovered = page.evaluate(HOVER, "missing")
    assert "read_file #2 (step 1)" in hovered["text"]
    assert "attempt 1 of 1 · failed" in hovered["text"]
    assert "error: " in hovered["text"] and "missing<b>x</b>.txt" in hovered["text"]
    assert hovered["markup"] == 0, hovered

    assert_chart_clear_of_tabs(page)
    for width in (700, 1100):
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_function(FITTED, arg="timeline")
        assert_chart_clear_of_tabs(page)
    page.click("[data-tab=calls]")
    page.wait_for_selector("[data-testid=tab-calls]")


def test_after_a_group_rollback_the_group_timeline_labels_do_not_overlap(
    live_server, worker, open_page, operator, task_api
):
    done = task_api.run(
        group_spec(
            {"calls": [delegate("north", "look"), delegate("south", "look")]},
            {"call": "write_file", "args": {"path": "report.txt", "content": "both"}},
            {"final": "reported"},
            agents={"north": agent({"final": "N"}), "south": agent({"final": "S"})},
            tools=["write_file"],
        ),
        timeout=120,
    )
    cut = GlobalCheckpoint.objects.get(root_id=done["id"], trigger="children_finished")
    group_rollback(
        root_id=done["id"], global_checkpoint_id=cut.id, user=operator, reason="redo", resume=True
    )
    task_api.wait(done["id"], "succeeded", timeout=90)

    page = open_page(
        operator,
        f"/tasks/{done['id']}/",
        viewport={"width": 1280, "height": 900},
        timeout_ms=60_000,
    )
    page.wait_for_selector("#group-lanes[data-ready='1']")
    traces = page.evaluate("document.getElementById('group-lanes').data.map((t) => t.name)")
    assert "superseded (rolled back)" in traces
    texts = page.evaluate(TEXT_BOXES)
    assert {"G1", "rollback to G1"} <= {t["text"] for t in texts}
    clashes = [
        (a["text"], b["text"])
        for i, a in enumerate(texts)
        for b in texts[i + 1 :]
        if overlap(a["box"], b["box"])
    ]
    assert clashes == []
    assert "(superseded)" in page.inner_text("[data-testid=group-lanes-text]")


# The step bars the timeline draws, and the traces drawn on the overview of collapsed steps.
STEP_BARS = """() => document.getElementById('timeline').data
  .filter((t) => t.name === 'steps').reduce((n, t) => n + t.x.length, 0)"""
ON_OVERVIEW = """() => document.getElementById('timeline').data
  .filter((t) => t.xaxis === 'x2').map((t) => t.name)"""


def test_a_long_task_shows_its_last_steps_with_the_earlier_failure_and_all_steps_on_request(
    live_server, open_page, operator, monkeypatch
):
    """The timeline of a task longer than TIMELINE_STEPS draws its last steps and, on an
    overview axis, the failed call of an earlier step; "Show all steps" swaps in every step."""
    # The view reads charts.TIMELINE_STEPS; timeline_from_step reads it in its module.
    monkeypatch.setattr(charts, "TIMELINE_STEPS", 4)
    monkeypatch.setattr(charts.scope, "TIMELINE_STEPS", 4)
    script = [
        {"call": "read_file", "args": {"path": "missing.txt"}},
        *({"call": "list_files", "args": {}} for _ in range(8)),
        {"final": "done"},
    ]
    task = scripted_task(script, ["read_file", "list_files"], user=operator)
    run_in_process(task)
    steps = TaskEvent.objects.filter(task=task, type="model_decision").count()

    page = open_page(operator, f"/tasks/{task.id}/", timeout_ms=60_000)
    page.wait_for_selector("#timeline[data-ready='1']")
    assert page.evaluate(STEP_BARS) == 4
    assert "errors" in page.evaluate(ON_OVERVIEW)
    assert page.evaluate("!!document.getElementById('timeline')._fullLayout.xaxis2")
    assert "collapsed" in page.inner_text("[data-testid=timeline-note]")

    page.click("[data-testid=timeline-show-all]")
    page.wait_for_function(f"() => ({STEP_BARS})() === {steps}")
    assert page.evaluate(ON_OVERVIEW) == []
    assert "Every step is drawn" in page.inner_text("[data-testid=timeline-note]")
    assert page.evaluate(HOVER, "missing")["text"].count("read_file #1 (step 0)") == 1
