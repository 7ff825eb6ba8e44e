"""Keyboard shortcuts on the review page and bulk selection in the inbox, in headless Chromium
under the enforced Content-Security-Policy (static review.js, no inline script)."""

from __future__ import annotations

from review.models import ReviewApproval, ReviewRequest
from tasks.canonical import canonical_hash
from tests.conftest import BROWSER, wait_for

pytestmark = BROWSER

RECORD_VIOLATIONS = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__csp.push(e.violatedDirective + " " + (e.blockedURI || "inline"));
});
"""


def focused(page) -> str:
    return page.evaluate("document.activeElement && document.activeElement.dataset.testid || ''")


def test_shortcuts_walk_focus_and_decide_only_through_the_forms(
    open_page, live_server, paused_review, operator
):
    first, second, third = (paused_review(title=t) for t in ("first", "second", "third"))
    page = open_page(operator, f"/reviews/{first.id}/", init_script=RECORD_VIOLATIONS)

    page.keyboard.press("?")
    assert page.is_visible("[data-testid=shortcut-help]")
    page.keyboard.press("Escape")
    assert not page.is_visible("[data-testid=shortcut-help]")

    page.keyboard.press("j")
    page.wait_for_url(f"{live_server.url}/reviews/{second.id}/")
    page.keyboard.press("k")
    page.wait_for_url(f"{live_server.url}/reviews/{first.id}/")

    # Typing in a field is typing, not a shortcut.
    page.click("[data-testid=comment-text]")
    page.keyboard.type("ja")
    assert page.input_value("[data-testid=comment-text]") == "ja"
    assert page.url == f"{live_server.url}/reviews/{first.id}/"
    page.evaluate("document.activeElement.blur()")

    page.keyboard.press("e")
    assert focused(page) == "edit-field-path"  # the edit form's first field
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("r")
    assert focused(page) == "reject-reason"
    page.evaluate("document.activeElement.blur()")

    # `a` submits the approve form, so its confirmation asks first: dismissed, nothing happens.
    asked = []

    def answer(accept: bool):
        def handle(dialog) -> None:
            asked.append(dialog.message)
            dialog.accept() if accept else dialog.dismiss()

        return handle

    page.once("dialog", answer(False))
    page.keyboard.press("a")
    wait_for(lambda: asked, 10, message="the confirmation")
    assert asked == ["Run delete_file with the arguments shown?"]
    assert ReviewRequest.objects.get(pk=first.pk).status == "pending"

    page.once("dialog", answer(True))
    page.keyboard.press("a")
    # The decision goes on to the next review in the inbox's order.
    page.wait_for_url(f"{live_server.url}/reviews/{second.id}/")
    assert ReviewRequest.objects.get(pk=first.pk).status == "approved"
    (approval,) = ReviewApproval.objects.filter(review=first)
    assert approval.arguments_hash == canonical_hash({"path": "old.log"})
    assert "delete_file: approved." in page.inner_text(".messages")

    # Bulk: tick every pending row, reject them; one line reports them all.
    page.goto(f"{live_server.url}/reviews/")
    page.check("[data-testid=bulk-all]")
    assert page.inner_text("[data-testid=bulk-count]") == "2"
    page.uncheck(f"[data-review-id='{third.id}'] [data-testid=bulk-item]")
    assert page.inner_text("[data-testid=bulk-count]") == "1"
    page.check(f"[data-review-id='{third.id}'] [data-testid=bulk-item]")
    page.fill("[aria-label='bulk reason']", "not today")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("[data-testid=bulk-reject]")
    page.wait_for_selector("text=Bulk reject of 2: 2 rejected.")
    assert page.locator(".messages li").count() == 1
    assert [r.status for r in ReviewRequest.objects.order_by("id")] == [
        "approved",
        "rejected",
        "rejected",
    ]
    assert ReviewRequest.objects.get(pk=second.pk).decision_reason == "not today"
    assert page.evaluate("window.__csp") == []


def test_the_live_refresh_leaves_ticked_rows_alone(open_page, paused_review, operator):
    paused_review(title="only")
    page = open_page(operator, "/reviews/?sort=risk", init_script=RECORD_VIOLATIONS)
    page.check("[data-testid=bulk-item]")
    refreshed = page.evaluate(
        """() => new Promise((resolve) => {
          const el = document.getElementById("inbox");
          const event = new CustomEvent("htmx:beforeRequest",
            {bubbles: true, cancelable: true, detail: {elt: el}});
          resolve(el.dispatchEvent(event));
        })"""
    )
    assert refreshed is False  # the refresh was cancelled
    assert page.is_checked("[data-testid=bulk-item]")
    assert page.evaluate("window.__csp") == []
