"""Any screen, any zone (issue 25), in headless Chromium against the live server: every main
page fits a 390 px phone without scrolling sideways and a review is still decidable there;
times follow the browser's zone (or the one the user chose) with its name, UTC on hover, in
parts HTMX swaps in too; dark mode; the no-role page in the layout; search and sorting."""

from __future__ import annotations

from datetime import UTC, datetime

from review.models import ReviewRequest
from tasks.models import Task
from tests.conftest import BROWSER, wait_for
from tests.factories import TaskFactory

pytestmark = BROWSER

PHONE = {"width": 390, "height": 844}
# Pages that chart parse Plotly's JavaScript (megabytes) on a first view: room for a busy box.
SLOW_MS = 60_000
FITS = "document.documentElement.scrollWidth <= window.innerWidth"
CHARTS_DRAWN = "document.querySelectorAll('[data-figure]:not([data-ready])').length === 0"


def test_every_main_page_fits_a_phone_and_its_review_can_be_approved(
    live_server, open_page, run_task, paused_review, operator
):
    task = run_task(
        [{"call": "write_file", "args": {"path": "a.txt", "content": "hi"}}, {"final": "done"}],
        ["write_file"],
    )
    review = paused_review(user=operator)
    page = open_page(operator, "/", viewport=PHONE, timeout_ms=SLOW_MS)
    paths = [
        "/",
        "/tasks/",
        f"/tasks/{task.id}/",
        "/reviews/",
        f"/reviews/{review.id}/",
        "/stats/failures/",
        "/stats/reviews/",
        "/ops/",
        "/audit/",
    ]
    for path in paths:
        page.goto(f"{live_server.url}{path}")
        page.wait_for_function(CHARTS_DRAWN)
        assert page.evaluate(FITS), (path, page.evaluate("document.documentElement.scrollWidth"))

    # The navigation folds behind its menu button.
    tasks_link = page.locator("nav[aria-label=Main] a[href='/tasks/']")
    assert not tasks_link.is_visible()
    page.click("[data-testid=nav-toggle]")
    assert tasks_link.is_visible()
    assert page.get_attribute("[data-testid=nav-toggle]", "aria-expanded") == "true"
    assert page.evaluate(FITS)

    # The decision buttons are on the phone's page and work.
    page.goto(f"{live_server.url}/reviews/{review.id}/")
    page.on("dialog", lambda dialog: dialog.accept())
    approve = page.locator("[data-testid=approve]")
    approve.scroll_into_view_if_needed()
    box = approve.bounding_box()
    assert box and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    approve.click()
    wait_for(
        lambda: ReviewRequest.objects.get(pk=review.pk).status == "approved",
        message="the review approved from the phone",
    )


def test_times_follow_the_browser_zone_unless_the_user_chose_one(
    live_server, open_page, run_task, viewer
):
    task = run_task(
        [{"call": "write_file", "args": {"path": "a.txt", "content": "hi"}}, {"final": "done"}],
        ["write_file"],
    )
    Task.objects.filter(pk=task.pk).update(created_at=datetime(2026, 6, 1, 8, 14, 3, tzinfo=UTC))
    page = open_page(viewer, "/preferences/", timezone_id="Asia/Kolkata", timeout_ms=SLOW_MS)
    page.goto(f"{live_server.url}/tasks/{task.id}/")
    created = page.locator("#task-live time").first
    page.wait_for_selector("#task-live time[data-local]")
    # 08:14:03 UTC is 13:44:03 in India (UTC+5:30), named as the browser's locale names it.
    assert created.inner_text().startswith("2026-06-01 13:44:03 ")
    assert created.inner_text().endswith(("GMT+5:30", "IST"))
    assert created.get_attribute("title") == "2026-06-01T08:14:03.000Z"
    assert page.inner_text("[data-testid=nav-user] [data-time-zone-label]") in (
        "Asia/Kolkata",
        "Asia/Calcutta",
    )

    # A tab HTMX swaps in is converted too.
    page.click("[data-tab=checkpoints]")
    page.wait_for_selector("[data-testid=tab-checkpoints]")
    page.wait_for_function(
        "document.querySelectorAll('#tab-body time').length > 0 && "
        "document.querySelectorAll('#tab-body time:not([data-local])').length === 0"
    )
    assert "GMT+5:30" in page.inner_text("#tab-body time") or "IST" in page.inner_text(
        "#tab-body time"
    )

    # The user's own setting wins over the browser's zone.
    page.goto(f"{live_server.url}/preferences/")
    page.select_option("[data-testid=time-zone]", "Europe/Berlin")
    page.click("[data-testid=preferences-form] button[type=submit]")
    page.goto(f"{live_server.url}/tasks/{task.id}/")
    page.wait_for_selector("#task-live time[data-local]")
    assert page.locator("#task-live time").first.inner_text().startswith("2026-06-01 10:14:03 ")


def test_dark_mode_the_no_role_page_search_and_sorting(
    live_server, open_page, outsider, viewer, operator
):
    page = open_page(outsider, "/", color_scheme="dark", viewport=PHONE, timeout_ms=SLOW_MS)
    response = page.goto(f"{live_server.url}/")
    assert response.status == 403
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(16, 21, 28)"
    assert "no role here" in page.inner_text("main")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip-link"
    page.click("[data-testid=nav-toggle]")
    assert page.locator("nav[aria-label=Main]").is_visible()
    page.click("form.logout button[type=submit]")
    page.wait_for_url("**/accounts/login/")

    staging = TaskFactory(title="Rotate the staging keys")
    TaskFactory(title="Archive old builds")
    page = open_page(viewer, "/tasks/", timeout_ms=SLOW_MS)
    search = page.locator("[data-testid=nav-search]")
    search.fill(str(staging.id)[:8])
    search.press("Enter")
    page.wait_for_url(f"**/tasks/{staging.id}/")
    page.locator("[data-testid=nav-search]").fill("staging keys")
    page.locator("[data-testid=nav-search]").press("Enter")
    page.wait_for_url(f"**/tasks/{staging.id}/")

    page.goto(f"{live_server.url}/tasks/")
    first = "document.querySelector('[data-task] a').textContent"
    assert page.evaluate(first) == "Archive old builds"  # newest first
    page.click("[data-testid=sort-title]")
    page.wait_for_url("**/tasks/?sort=title")
    page.click("[data-testid=sort-title]")
    page.wait_for_url("**/tasks/?sort=-title")
    assert page.evaluate(first) == "Rotate the staging keys"
