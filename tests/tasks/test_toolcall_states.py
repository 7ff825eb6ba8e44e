"""The tool call and review state machines: their tables and their one writer each."""

from __future__ import annotations

import pytest

from review.models import ReviewRequest, ReviewStatus
from review.services import ReviewConflict, review_transition
from tasks.models import ToolCall, ToolCallStatus
from tasks.services import ToolCallConflict, toolcall_transition
from tasks.states import TOOLCALL_SETTLED, TOOLCALL_TRANSITIONS, IllegalTransition, LeaseLost
from tests.factories import scripted_task

C = ToolCallStatus

pytestmark = pytest.mark.django_db


@pytest.fixture
def call():
    task = scripted_task([{"final": "x"}])
    return ToolCall.objects.create(task=task, call_id="c1", tool="read_file")


def test_every_status_has_a_row_in_the_table():
    assert set(TOOLCALL_TRANSITIONS) == set(C.values)
    assert not TOOLCALL_TRANSITIONS[C.REJECTED] and not TOOLCALL_TRANSITIONS[C.DENIED]


def test_an_outcome_sets_finished_at_and_a_start_sets_started_at(call):
    toolcall_transition(call=call, to=C.RUNNING, fields={"attempts": 1})
    assert call.started_at is not None and call.finished_at is None
    toolcall_transition(call=call, to=C.SUCCEEDED, fields={"result": {"ok": True}})
    row = ToolCall.objects.get(pk=call.pk)
    assert row.status == C.SUCCEEDED and row.result == {"ok": True} and row.attempts == 1
    assert row.finished_at is not None and C.SUCCEEDED in TOOLCALL_SETTLED


def test_an_illegal_move_changes_nothing(call):
    toolcall_transition(call=call, to=C.DENIED)
    with pytest.raises(IllegalTransition, match="tool call"):
        toolcall_transition(call=call, to=C.RUNNING)
    assert ToolCall.objects.get(pk=call.pk).status == C.DENIED


def test_a_row_changed_meanwhile_is_a_conflict(call):
    stale = ToolCall.objects.get(pk=call.pk)
    toolcall_transition(call=call, to=C.RUNNING)
    with pytest.raises(ToolCallConflict):
        toolcall_transition(call=stale, to=C.AWAITING_REVIEW)
    assert ToolCall.objects.get(pk=call.pk).status == C.RUNNING


def test_a_worker_with_a_stale_epoch_writes_nothing(call):
    with pytest.raises(LeaseLost):
        toolcall_transition(call=call, to=C.RUNNING, epoch=7)
    assert ToolCall.objects.get(pk=call.pk).status == C.PROPOSED


def test_a_review_is_decided_once(call):
    review = ReviewRequest.objects.create(
        task_id=call.task_id, tool_call=call, tool=call.tool, requested_at=call.created_at
    )
    stale = ReviewRequest.objects.get(pk=review.pk)
    review_transition(review=review, to=ReviewStatus.CANCELED, fields={"comment": "gone"})
    row = ReviewRequest.objects.get(pk=review.pk)
    assert row.status == ReviewStatus.CANCELED and row.decided_at is not None
    with pytest.raises(IllegalTransition, match="review"):
        review_transition(review=review, to=ReviewStatus.APPROVED)
    with pytest.raises(ReviewConflict):
        review_transition(review=stale, to=ReviewStatus.APPROVED)
