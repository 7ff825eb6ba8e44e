"""A standing rule pauses itself when a call it allowed ends with an unknown outcome (the loop's
unknown-outcome gate, review.services.review_gate_unknown_outcome)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from review.models import ReviewRequest, ReviewRule
from review.selectors import standing_rule_get
from review.services import review_gate_unknown_outcome
from tests.conftest import ApiClient
from tests.factories import run_in_process, scripted_task

pytestmark = pytest.mark.django_db(transaction=True)


class Stopped(Exception):
    pass


def test_an_unknown_outcome_of_a_call_it_allowed_pauses_the_rule(
    paused_review, operator, quiet_watchdog
):
    script = [
        {"call": "write_file", "args": {"path": "service.conf", "content": "a=1\n"}},
        {"final": "ok"},
    ]
    review = paused_review(script, ["write_file"], {}, user=operator)
    client = ApiClient(operator)
    shown = client.get(f"/api/v1/reviews/{review.id}").json()
    client.decide(
        review.id,
        decision="approve",
        remember={
            "suggestion": shown["suggested_rules"][0]["id"],
            "until": (timezone.localdate() + timedelta(days=1)).isoformat(),
        },
    )
    rule = ReviewRule.objects.get(origin_review=review)
    task = scripted_task(script, ["write_file"], user=operator)
    assert run_in_process(task) == "succeeded"
    call = ReviewRequest.objects.get(task=task, kind="standing_rule").tool_call

    def pause(events, open_review):
        open_review(None)
        raise Stopped

    with pytest.raises(Stopped):
        review_gate_unknown_outcome(tool_call=call, step_index=1, pause=pause)
    paused = standing_rule_get(rule_id=rule.id)
    assert paused.paused and "unknown outcome" in paused.paused_reason
    assert (paused.allowed, paused.unknown_outcome) == (1, 1)
