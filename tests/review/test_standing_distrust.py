"""A standing rule pauses itself when a call it allowed ends with an unknown outcome (the loop's
unknown-outcome gate, review.services.review_gate_unknown_outcome), and its approval of a call
is re-checked against the rule when the call runs later (review.recheck)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from review.models import ReviewRequest, ReviewRule
from review.recheck import approval_recheck
from review.selectors import standing_rule_get
from review.services import review_gate_unknown_outcome, standing_rule_pause
from tasks.selectors import task_tool
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


def test_a_call_a_rule_approved_is_rechecked_against_the_rule_before_it_runs(
    paused_review, operator, quiet_watchdog
):
    """A call a standing rule approved that runs in a later job (its worker stopped before
    the call ran) runs only while the rule would still approve it."""
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
    tool = task_tool(task_id=task.id, name="write_file")

    def recheck() -> list[str]:
        return approval_recheck(
            tool_call=call, tool=tool, task=task, targets=lambda: [], now=timezone.now()
        ).changes

    assert not [c for c in recheck() if "standing rule" in c]
    standing_rule_pause(rule_id=rule.id, reason="a call it allowed went wrong")
    assert [c for c in recheck() if f"standing rule {rule.name} is paused" in c]
