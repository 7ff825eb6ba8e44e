"""The kill switch in headless Chromium: an operator pauses a standing rule from
`/reviews/rules/` with a reason, then revokes it; the next call it used to allow waits for a
person, and the rule's page says it is revoked and offers no way back."""

from __future__ import annotations

import pytest

from review.models import ReviewRequest, ReviewRule
from tasks.models import AuditEntry
from tests.conftest import BROWSER
from tests.security.test_standing_rules import next_call, standing_rule, write_conf

pytestmark = BROWSER


@pytest.fixture(autouse=True)
def _quiet(quiet_watchdog, harness_dirs) -> None:
    pass


def test_pause_then_revoke_from_the_rules_page(live_server, open_page, paused_review, operator):
    review = paused_review(write_conf(), ["write_file"], {}, user=operator)
    rule = standing_rule(operator, review)
    outcome, _ = next_call(write_conf(content="b=2\n"), ["write_file"], user=operator)
    assert outcome == "succeeded"  # the rule allows the call it was made for

    page = open_page(operator, "/reviews/rules/", timeout_ms=15_000)
    row = page.locator(f"[data-testid=standing-rule-{rule.id}]")
    assert "active" in row.inner_text() and "Until" in page.inner_text("thead")
    row.locator(f"[data-testid=pause-reason-{rule.id}]").fill("checking its calls")
    page.once("dialog", lambda dialog: dialog.accept())
    row.locator(f"[data-testid=pause-{rule.id}]").click()
    page.wait_for_url(f"{live_server.url}/reviews/rules/")
    row = page.locator(f"[data-testid=standing-rule-{rule.id}]")
    assert page.locator(f"[data-testid=rule-state-{rule.id}]").inner_text() == "paused"
    assert "checking its calls" in row.inner_text()

    row.locator(f"[data-testid=revoke-reason-{rule.id}]").fill("covers too much")
    page.once("dialog", lambda dialog: dialog.accept())
    row.locator(f"[data-testid=revoke-{rule.id}]").click()
    page.wait_for_url(f"{live_server.url}/reviews/rules/")
    assert page.locator(f"[data-testid=rule-state-{rule.id}]").inner_text() == "revoked"
    row = page.locator(f"[data-testid=standing-rule-{rule.id}]")
    assert "covers too much" in row.inner_text()
    assert row.locator(f"[data-testid=resume-{rule.id}]").count() == 0
    assert row.locator(f"[data-testid=pause-{rule.id}]").count() == 0

    stored = ReviewRule.objects.get(pk=rule.pk)
    assert (stored.standing_state, stored.revoked_by) == ("revoked", operator)
    assert list(
        AuditEntry.objects.filter(target=f"standing rule {rule.name}")
        .order_by("at")
        .values_list("action", "reason")
    )[-2:] == [
        ("standing_rule_pause", "checking its calls"),
        ("standing_rule_revoke", "covers too much"),
    ]

    # The rule no longer applies: a matching call pauses for a person.
    outcome, call = next_call(write_conf(content="c=3\n"), ["write_file"], user=operator)
    assert outcome == "paused" and call.status == "awaiting_review"
    assert ReviewRequest.objects.get(tool_call=call).kind == "policy"

    page.goto(f"{live_server.url}/reviews/rules/{rule.id}/")
    assert page.locator("[data-testid=rule-state]").inner_text() == "revoked"
    assert "covers too much" in page.locator("[data-testid=rule-revoked]").inner_text()
    assert "content: any" in page.locator("[data-testid=rule-matches]").inner_text()
    assert page.locator("button", has_text="Resume").count() == 0
