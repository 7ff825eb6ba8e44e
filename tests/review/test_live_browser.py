"""Live review signals in headless Chromium: the nav badge, the tab title and the inbox list
change without a reload when a review opens (a real task on real workers pauses) and closes
(another operator rejects it over the API), a ticked row is never dropped by a refresh (the
inbox offers "N new reviews — refresh"); screen readers hear the new review; and the
browser's notification permission is asked on the "Notify me" click, never on page load."""

from __future__ import annotations

import pytest

from review.models import ReviewRequest
from tasks.models import Task
from tests.conftest import BROWSER, ApiClient, delete_script, wait_for
from tests.factories import scripted_task
from tests.security.test_csp_browser import RECORD_VIOLATIONS

pytestmark = [*BROWSER, pytest.mark.integration]

# Counts permission requests and records the notifications the page shows (Chromium's own
# Notification, with the permission granted to the context, underneath).
RECORD_NOTIFICATIONS = """
window.__asks = 0;
window.__notes = [];
window.__loaded = Date.now();
const Native = window.Notification;
const asked = Native.requestPermission.bind(Native);
class Recorded extends Native {
  constructor(title, options) {
    super(title, options);
    const { body, tag } = options || {};
    window.__notes.push({ title: title, body: body, tag: tag });
  }
}
Recorded.requestPermission = function () { window.__asks += 1; return asked(); };
window.Notification = Recorded;
"""


def test_badge_title_and_inbox_follow_reviews_live_and_notify_only_after_a_click(
    live_server, workers, open_page, operator, second_operator, viewer
):
    inbox = open_page(
        operator,
        "/reviews/",
        init_script=RECORD_VIOLATIONS + RECORD_NOTIFICATIONS,
        permissions=["notifications"],
        timeout_ms=30_000,
    )
    elsewhere = open_page(viewer, "/tasks/", timeout_ms=30_000)
    loaded = inbox.evaluate("window.__loaded")
    assert inbox.title() == "Reviews · Agent Harness"
    assert elsewhere.title() == "Tasks · Agent Harness"
    assert inbox.query_selector("[data-testid=pending-count]") is None

    # Nothing asks for permission on load; the click does, once.
    assert inbox.evaluate("window.__asks") == 0
    toggle = inbox.locator("[data-testid=notify-toggle]")
    assert toggle.inner_text() == "Notify me"
    toggle.click()
    wait_for(lambda: toggle.inner_text() == "Notifications on", 10, message="the opt-in")
    assert inbox.evaluate("window.__asks") == 1
    assert inbox.evaluate("localStorage.getItem('harness-review-notify')") == "on"

    task = scripted_task(
        delete_script(),
        ["delete_file"],
        enqueue=True,
        title="clean old logs",
        workspace={"files": {"old.log": "stale\n"}},
    )
    wait_for(lambda: inbox.title() == "(1) Reviews · Agent Harness", 90, interval=0.2)
    assert inbox.inner_text("[data-testid=pending-count]") == "1"
    # The viewer's page hears of it (its live region) but counts nothing: a viewer decides
    # nothing, so no badge and no "(1)" in the title.
    wait_for(
        lambda: "new review waiting" in elsewhere.inner_text("[data-testid=reviews-live]"),
        90,
        interval=0.2,
        message="the viewer's page to poll",
    )
    assert elsewhere.title() == "Tasks · Agent Harness"
    assert elsewhere.query_selector("[data-testid=pending-count]") is None
    review = ReviewRequest.objects.get(task=task, status="pending")
    inbox.wait_for_selector(f"[data-testid=review-row][data-review-id='{review.id}']")
    assert inbox.inner_text("[data-testid=reviews-live]") == (
        "1 new review waiting: delete_file on task clean old logs"
    )
    assert inbox.evaluate("window.__notes") == [
        {
            "title": "Review: delete_file",
            "body": "Task clean old logs",
            "tag": f"harness-review-{review.id}",
        }
    ]

    # With a row ticked for a bulk decision, a second review does not redraw the list (the
    # tick stays); the inbox offers the refresh instead.
    tick = inbox.locator(f"[data-testid=bulk-item][value^='{review.id}:']")
    tick.check()
    second = scripted_task(
        delete_script("older.log"),
        ["delete_file"],
        enqueue=True,
        title="clean older logs",
        workspace={"files": {"older.log": "stale\n"}},
    )
    wait_for(lambda: inbox.title() == "(2) Reviews · Agent Harness", 90, interval=0.2)
    offer = inbox.locator("[data-testid=reviews-new]")
    offer.wait_for()
    assert offer.inner_text() == "1 new review — refresh"
    assert tick.is_checked()
    later = ReviewRequest.objects.get(task=second, status="pending")
    assert inbox.query_selector(f"[data-review-id='{later.id}']") is None
    tick.uncheck()
    offer.click()
    inbox.wait_for_selector(f"[data-testid=review-row][data-review-id='{later.id}']")

    # Another operator closes them over the API: both pages drop the count, the inbox the rows.
    for closing in (review, later):
        rejected = ApiClient(second_operator).decide(closing.id, decision="reject", reason="no")
        assert rejected.status_code == 200, rejected.content
    for page, title in ((inbox, "Reviews · Agent Harness"), (elsewhere, "Tasks · Agent Harness")):
        wait_for(lambda p=page, t=title: p.title() == t, 30, interval=0.2, message=title)
        assert page.query_selector("[data-testid=pending-count]") is None
    inbox.wait_for_selector("[data-testid=review-row]", state="detached")
    # The same documents all along (no reload), one permission request, no CSP violation.
    assert inbox.evaluate("window.__loaded") == loaded
    assert inbox.evaluate("window.__asks") == 1
    assert inbox.evaluate("window.__csp") == []
    for run in (task, second):
        wait_for(lambda t=run: Task.objects.get(pk=t.pk).status in ("succeeded", "failed"), 60)
