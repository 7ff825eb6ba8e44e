"""The pages keep working under the enforced Content-Security-Policy: no violation on any page
an operator opens, charts render (Plotly served locally), and the confirmations that used to
be inline handlers still ask before a decision is sent."""

from __future__ import annotations

import pytest

from review.models import ReviewRequest
from tests.conftest import BROWSER

pytestmark = BROWSER

RECORD_VIOLATIONS = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__csp.push(e.violatedDirective + " " + (e.blockedURI || "inline"));
});
"""


@pytest.fixture
def page(open_page, operator):
    return open_page(operator, "/", init_script=RECORD_VIOLATIONS)


def test_operator_pages_raise_no_csp_violation_and_confirmations_still_ask(
    page, live_server, paused_review
):
    review = paused_review(
        [{"call": "write_file", "args": {"path": "a.conf", "content": "x"}}, {"final": "ok"}],
        ["write_file"],
        {"a.conf": "y"},
    )
    for path in (
        "/",
        "/tasks/",
        f"/tasks/{review.task_id}/",
        f"/tasks/{review.task_id}/?tab=timeline",
        "/reviews/",
        f"/reviews/{review.id}/",
        "/stats/failures/",
        "/ops/",
        "/audit/",
    ):
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("load")
        assert page.evaluate("window.__csp") == [], path
        assert page.evaluate("typeof window.htmx") == "object", path

    page.goto(f"{live_server.url}/stats/failures/")
    page.wait_for_selector("[data-figure][data-ready='1']")

    page.goto(f"{live_server.url}/reviews/{review.id}/")
    asked = []

    def dismiss(dialog) -> None:
        asked.append(dialog.message)
        dialog.dismiss()

    page.once("dialog", dismiss)
    page.click("[data-testid=approve]")
    assert asked == ["Run write_file with the arguments shown?"]
    assert ReviewRequest.objects.get(pk=review.pk).status == "pending"
    assert page.evaluate("window.__csp") == []
