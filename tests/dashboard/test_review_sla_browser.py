"""The SLA page in headless Chromium against the live server (issue #45 item 6): a review
decided past its rule's target and one still open past it show in the highlight, as a red row
of the rule's table, and as a drawn bar of "past the target" in the chart."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from review.models import ReviewRequest
from tests.conftest import BROWSER, approve

pytestmark = BROWSER

CONFIG = """
review_rules:
  - {name: destructive, risk: destructive, action: review, reason: "Deletes data.",
     sla: {decide_within: 2m}}
"""
CHARTS_DRAWN = "() => document.querySelectorAll('[data-figure]:not([data-ready])').length === 0"
# The drawn bars of a trace of a chart, as page boxes.
BARS = """([id, name]) => {
  const el = document.getElementById(id);
  const index = el.data.findIndex((t) => t.name === name);
  const trace = document.querySelectorAll(`#${id} .barlayer .trace`)[index];
  const paths = trace.querySelectorAll('.point path');
  return Array.from(paths, (p) => p.getBoundingClientRect().toJSON());
}"""


def test_a_breach_shows_in_the_highlight_the_table_and_the_chart(
    live_server, open_page, harness_yaml, paused_review, operator, viewer
):
    harness_yaml(CONFIG)
    decided, waiting = paused_review(), paused_review()
    ten_minutes_ago = timezone.now() - timedelta(minutes=10)
    ReviewRequest.objects.filter(pk__in=[decided.pk, waiting.pk]).update(
        requested_at=ten_minutes_ago
    )
    approve(decided, operator, via="page")

    page = open_page(viewer, "/stats/reviews/?since=24h", timeout_ms=60_000)
    page.wait_for_function(CHARTS_DRAWN)
    highlight = page.locator("[data-testid=sla-breaches]")
    assert "sla-breach" in highlight.get_attribute("class")
    assert page.text_content("[data-testid=sla-open-late]") == "1"
    assert page.text_content("[data-testid=sla-decided-late]") == "1"
    late = page.locator("[data-testid=sla-late-review]")
    assert late.count() == 1 and f"#{waiting.id}" in late.inner_text()
    assert "10 min" in late.inner_text() and "2 min 0 s" in late.inner_text()
    row = page.locator("[data-testid=sla-rule] tr[data-key=destructive]")
    assert "breach" in row.get_attribute("class")
    assert row.locator("[data-col=breached]").inner_text() == "1"
    # The bar is drawn, red, with height; the axis names the zone the chart is drawn in.
    (bar,) = page.evaluate(BARS, ["chart-sla-backlog", "past the target"])
    assert bar["height"] > 10
    figure = page.evaluate("document.getElementById('chart-sla-backlog').layout")
    assert figure["xaxis"]["title"]["text"] == "reviews opened, by hour (UTC)"
    p95 = page.evaluate(
        "document.getElementById('chart-sla-decision').data.find((t) => t.name === 'p95')"
    )
    assert p95["marker"]["color"] == ["#b3261e"]
