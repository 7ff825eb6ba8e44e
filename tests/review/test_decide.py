"""Deciding reviews through the service, with the loop run in-process before and after."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from checkpoints.services import checkpoint_decode
from review.models import ReviewRequest
from review.services import (
    ReviewConflict,
    ReviewForbidden,
    ReviewInvalid,
    review_decide,
    reviews_expire_overdue,
)
from tasks.canonical import canonical_hash
from tasks.models import AuditEntry, Task, ToolCall
from tests.conftest import approve
from tests.factories import ReviewRuleFactory, run_in_process
from tests.review.conftest import four_eyes_on_deletes

pytestmark = pytest.mark.django_db(transaction=True)


def shown(review: ReviewRequest) -> str:
    """The arguments_hash an operator looking at the review right now is shown."""
    return canonical_hash(ReviewRequest.objects.get(pk=review.pk).arguments)


def tool_messages(task: Task) -> list[str]:
    """What the model was shown as tool results, from the task's head checkpoint."""
    task.refresh_from_db()
    state = checkpoint_decode(task.head_checkpoint).state
    return [m.content for m in state.messages if m.role == "tool"]


def test_delete_file_pauses_before_running(paused_review):
    review = paused_review()
    task = review.task
    assert task.status == "waiting_review"
    assert (task.workspace_path / "old.log").read_text() == "stale\n"
    assert review.tool_call.status == "awaiting_review"
    assert review.matched_rules[0]["name"] == "destructive"
    assert "-stale" in review.preview
    assert review.checkpoint.trigger == "before_review"


def test_approval_runs_exactly_the_approved_call(paused_review, operator):
    review = paused_review()
    approve(review, operator, comment="ok")
    call = ToolCall.objects.get(pk=review.tool_call_id)
    assert call.status == "approved"
    assert call.arguments_hash == canonical_hash({"path": "old.log"})
    task = Task.objects.get(pk=review.task_id)
    assert task.status == "queued"

    assert run_in_process(task) == "succeeded"
    assert not (task.workspace_path / "old.log").exists()
    call.refresh_from_db()
    assert call.status == "succeeded" and call.attempts == 1
    decided = task.events.get(type="review_decided")
    assert decided.actor == "operator"
    assert decided.payload["decision"] == "approved"
    assert decided.payload["original_arguments"] == decided.payload["approved_arguments"]
    audit = AuditEntry.objects.get(action="review_approve")
    assert audit.actor == operator and audit.task_id == task.id


def test_rejection_reaches_the_model_and_nothing_runs(paused_review, operator):
    review = paused_review()
    review_decide(
        review_id=review.id,
        user=operator,
        decision="reject",
        reason="that log is evidence",
        comment="archive it instead",
    )
    task = Task.objects.get(pk=review.task_id)
    assert run_in_process(task) == "succeeded"
    assert (task.workspace_path / "old.log").exists()
    feedback = tool_messages(task)[-1]
    assert "that log is evidence" in feedback and "archive it instead" in feedback
    assert len(feedback.splitlines()) == 3
    review.refresh_from_db()
    assert review.status == "rejected" and review.decision_reason == "that log is evidence"


def test_edited_arguments_are_what_runs(paused_review, operator):
    review = paused_review(
        script=[
            {"call": "write_file", "args": {"path": "app.conf", "content": "debug=true\n"}},
            {"final": "configured"},
        ],
        tools=["write_file"],
        files={"app.conf": "debug=false\n"},
    )
    assert review.matched_rules[0]["name"] == "protected-config"
    edited = {"path": "app.conf", "content": "debug=false\nlog=info\n"}
    approve(review, operator, arguments=edited, comment="keep debug off")
    task = Task.objects.get(pk=review.task_id)
    assert run_in_process(task) == "succeeded"
    assert (task.workspace_path / "app.conf").read_text() == "debug=false\nlog=info\n"
    review.refresh_from_db()
    assert review.edited_arguments == edited
    payload = task.events.get(type="review_decided").payload
    assert payload["original_arguments"]["content"] == "debug=true\n"
    assert payload["approved_arguments"] == edited and payload["edited"] is True


def test_invalid_edited_arguments_change_nothing(paused_review, operator):
    review = paused_review()
    with pytest.raises(ReviewInvalid) as exc:
        approve(review, operator, arguments={"path": "old.log", "force": True})
    assert exc.value.errors[0]["field"] == "arguments.force"
    review.refresh_from_db()
    assert review.status == "pending" and review.edited_arguments is None
    assert review.approvals.count() == 0
    assert Task.objects.get(pk=review.task_id).status == "waiting_review"


def test_edits_the_policy_denies_are_refused(paused_review, operator):
    review = paused_review(
        script=[{"call": "run_command", "args": {"command": "ls"}}, {"final": "x"}],
        tools=["run_command"],
        review={"always": ["run_command"]},
    )
    with pytest.raises(ReviewInvalid, match="denies"):
        approve(review, operator, arguments={"command": "rm -rf /"})
    review.refresh_from_db()
    assert review.status == "pending"


def test_arguments_changed_after_approval_never_run(paused_review, operator):
    review = paused_review()
    approve(review, operator)
    ToolCall.objects.filter(pk=review.tool_call_id).update(arguments={"path": "other.log"})
    task = Task.objects.get(pk=review.task_id)
    assert run_in_process(task) == "failed"
    task.refresh_from_db()
    assert task.error_class == "internal_error" and "changed after approval" in task.error_message
    assert (task.workspace_path / "old.log").exists()


def test_a_decided_review_cannot_be_decided_again(paused_review, operator, second_operator):
    review = paused_review()
    review_decide(review_id=review.id, user=operator, decision="reject", reason="no")
    with pytest.raises(ReviewConflict):
        approve(review, second_operator)
    review.refresh_from_db()
    assert review.status == "rejected" and review.decided_by == operator


def test_viewers_cannot_decide(paused_review, viewer):
    review = paused_review()
    with pytest.raises(ReviewForbidden):
        approve(review, viewer)
    review.refresh_from_db()
    assert review.status == "pending" and review.approvals.count() == 0
    assert Task.objects.get(pk=review.task_id).status == "waiting_review"


def test_four_eyes_needs_distinct_operators_and_never_the_creator(
    paused_review,
    operator,
    second_operator,
    decider,
):
    four_eyes_on_deletes()
    review = paused_review(user=operator)
    assert (review.approvals_required, review.forbid_creator) == (2, True)
    with pytest.raises(ReviewForbidden):
        approve(review, operator)

    approve(review, second_operator)
    review.refresh_from_db()
    assert review.status == "pending" and review.approvals.count() == 1
    assert Task.objects.get(pk=review.task_id).status == "waiting_review"
    with pytest.raises(ReviewConflict):
        approve(review, second_operator)

    approve(review, decider)
    review.refresh_from_db()
    assert review.status == "approved"
    assert Task.objects.get(pk=review.task_id).status == "queued"
    assert review.task.events.filter(type="review_approval").count() == 1


def test_an_edit_under_four_eyes_needs_fresh_approvals(
    paused_review, operator, second_operator, decider
):
    four_eyes_on_deletes(forbid_creator=False)
    review = paused_review(files={"old.log": "x", "older.log": "y"})
    approve(review, operator)
    approve(review, second_operator, arguments={"path": "older.log"})
    review.refresh_from_db()
    assert review.status == "pending", "the first approval was for other arguments"
    approve(review, decider)
    review.refresh_from_db()
    assert review.status == "approved"
    assert ToolCall.objects.get(pk=review.tool_call_id).arguments == {"path": "older.log"}


def test_expiry_with_reject_tells_the_model_and_resumes(paused_review):
    review = paused_review()
    assert reviews_expire_overdue(now=timezone.now()) == 0
    assert reviews_expire_overdue(now=review.expires_at + timedelta(seconds=1)) == 1
    review.refresh_from_db()
    assert review.status == "expired" and review.decided_by is None
    call = ToolCall.objects.get(pk=review.tool_call_id)
    assert call.error_class == "review_expired"
    task = Task.objects.get(pk=review.task_id)
    assert task.status == "queued"
    assert run_in_process(task) == "succeeded"
    feedback = tool_messages(task)[-1]
    assert "expired" in feedback and "reject" not in feedback
    assert (task.workspace_path / "old.log").exists()
    assert task.events.filter(type="review_expired").count() == 1


def test_expiry_with_fail_task_fails_the_task(paused_review):
    ReviewRuleFactory(
        name="delete-or-fail",
        tool="delete_file",
        expires_after=timedelta(minutes=5),
        on_expiry="fail_task",
    )
    review = paused_review()
    assert review.expires_at - review.requested_at == timedelta(minutes=5)
    reviews_expire_overdue(now=review.expires_at)
    task = Task.objects.get(pk=review.task_id)
    assert task.status == "failed" and task.error_class == "review_expired"
    assert ReviewRequest.objects.get(pk=review.pk).status == "expired"


def test_the_periodic_sweep_expires_overdue_reviews(paused_review):
    from django.core.management import call_command

    review = paused_review()
    with time_machine.travel(review.requested_at + timedelta(hours=1)):
        fresh = paused_review()
    # The first review's time is up, the second one's is not.
    with time_machine.travel(review.expires_at + timedelta(seconds=1)):
        call_command("harness_sweep")
    assert ReviewRequest.objects.get(pk=review.pk).status == "expired"
    assert ReviewRequest.objects.get(pk=fresh.pk).status == "pending"
    assert Task.objects.get(pk=review.task_id).status == "queued"


def test_a_partial_approval_with_an_edit_previews_the_edited_call(
    paused_review, operator, second_operator
):
    """Under four eyes the first operator's edit is what the second is asked to approve: the
    review keeps the edited call's effect (computed by the same preview, against the same
    file) beside the proposal's, with who edited and the edit argument by argument."""
    four_eyes_on_deletes(forbid_creator=False)
    review = paused_review(files={"old.log": "stale\n", "keep.log": "evidence\n"})
    approve(review, operator, arguments={"path": "keep.log"})
    review.refresh_from_db()
    assert review.status == "pending"
    assert "-stale" in review.preview and "-evidence" not in review.preview
    assert "-evidence" in review.shown_preview and "-stale" not in review.shown_preview
    assert review.edited_by == operator and review.edited_at is not None
    assert review.edit_changes == [
        {"argument": "path", "proposed": "old.log", "edited": "keep.log"}
    ]
