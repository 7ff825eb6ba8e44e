"""The unknown-outcome review (a non-idempotent call whose worker stopped while it ran) is no
routine row: the inbox marks it, and its deadline is stated once. It carries its call's
earlier rules, whose "expires after 4h" does not apply to it: it has no deadline, and said both
"expires after 4h" and "Time left: no limit"."""

from __future__ import annotations

import pytest

from review.models import ReviewRequest
from review.services import review_gate_unknown_outcome
from tests.conftest import approve, page_client

pytestmark = pytest.mark.django_db(transaction=True)


class Stopped(Exception):
    pass


def _unknown_outcome_review(paused_review, operator) -> tuple[ReviewRequest, ReviewRequest]:
    routine = paused_review()
    approve(routine, operator)

    def pause(events, open_review):
        open_review(None)
        raise Stopped

    with pytest.raises(Stopped):
        review_gate_unknown_outcome(tool_call=routine.tool_call, step_index=1, pause=pause)
    unknown = ReviewRequest.objects.get(tool_call=routine.tool_call, kind="unknown_outcome")
    return paused_review(), unknown


def test_the_inbox_marks_an_unknown_outcome_and_the_page_states_one_deadline(
    paused_review, operator, quiet_watchdog
):
    routine, unknown = _unknown_outcome_review(paused_review, operator)
    assert routine.expires_at is not None and unknown.expires_at is None
    assert any(rule.get("expires_after") for rule in unknown.matched_rules)
    client = page_client(operator)
    inbox = client.get("/reviews/").content.decode()
    rows = {
        review.id: inbox[inbox.index(f'data-review-id="{review.id}"') :].split("</tr>")[0]
        for review in (routine, unknown)
    }
    assert 'data-testid="unknown-outcome-mark"' in rows[unknown.id]
    assert "review-kind-unknown_outcome" in inbox
    assert 'data-testid="unknown-outcome-mark"' not in rows[routine.id]

    page = client.get(f"/reviews/{unknown.id}/").content.decode()
    assert "no limit" in page and "expires after" not in page
    # A routine review still says when it expires, where its rule says so.
    assert "expires after 4h" in client.get(f"/reviews/{routine.id}/").content.decode()
