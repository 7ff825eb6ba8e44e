"""Reviews of kind `version_drift` (issue #43): the code under a paused task changed in a way
that touches its next step (the pending call's tool or schema, the graph's next node, the
agent's definition). The loop stops before the call runs and opens one
(review_gate_version_drift); a person chooses how to go on (review_resolve_version_drift):

- `continue` with the new code: the call runs with its arguments, or with `arguments` edited
  to fit the new schema, once approved as any approval is (`arguments_hash` of the arguments
  shown, the edit checked against the new schema and the policy, the stricter requirements,
  four-eyes); arguments that no longer validate are refused until an edit supplies them;
- `migrate` with a migration registered in harness.yaml `migrations:` (the worker runs it on
  the checkpoint's state and records the result as a checkpoint: agent.runtime.migrate);
- `restart` from an earlier checkpoint of the task (a rollback, through the core's domain
  event `tasks.signals.restart_requested`, which checkpoints answers);
- `cancel`: the task is canceled.

Every choice is recorded on the review (`choice`), in an event, the audit log and a receipt."""

from __future__ import annotations

from typing import Any, cast

from django.contrib.auth.models import User
from django.db import transaction

from review.models import ReceiptVia, ReviewRequest, ReviewStatus
from review.selectors.access import user_can_decide
from review.services.approvals import approval_add, approver_check, decision_check_open
from review.services.drift_choices import choice_close, drift_edit_check
from review.services.drift_gate import VERSION_DRIFT
from review.services.edits import edit_tighten
from review.services.errors import ReviewConflict, ReviewForbidden, ReviewInvalid
from review.services.settle import review_settle, task_resume_when_decided
from tasks.canonical import canonical_hash
from tasks.models import Task
from tasks.services import task_lock, task_transition
from tasks.signals import restart_requested
from tasks.states import TaskStatus

VERSION_DRIFT_DECISIONS = ("continue", "migrate", "restart", "cancel")
VERSION_DRIFT_HINT = (
    "the code changed under this call: decide continue (with arguments_hash, and arguments "
    "when they must change), migrate (with migration), restart (with checkpoint_id) or cancel"
)
# What a decision on this kind of review may be, and the hint a wrong one gets.
KIND_DECISIONS = (VERSION_DRIFT_HINT, VERSION_DRIFT_DECISIONS)


def review_resolve_version_drift(
    *,
    review_id: Any,
    user: User,
    decision: str,
    arguments_hash: str | None = None,
    arguments: dict[str, Any] | None = None,
    migration: str | None = None,
    checkpoint_id: Any = None,
    comment: str = "",
    via: str = ReceiptVia.API,
) -> ReviewRequest:
    """One choice on a pending `version_drift` review (see the module docstring). Raises
    ReviewForbidden, ReviewConflict or ReviewInvalid (naming the field); on any of them
    nothing changes."""
    if not user_can_decide(user):
        raise ReviewForbidden("only operators may decide reviews")
    if decision not in VERSION_DRIFT_DECISIONS:
        raise ReviewInvalid(
            VERSION_DRIFT_HINT,
            errors=[{"field": "decision", "message": " | ".join(VERSION_DRIFT_DECISIONS)}],
        )
    if decision == "continue" and not arguments_hash:
        raise ReviewInvalid(
            "continuing runs the call: name the arguments you were shown",
            errors=[{"field": "arguments_hash", "message": "required for continue"}],
        )
    task_id = ReviewRequest.objects.values_list("task_id", flat=True).get(id=review_id)
    with transaction.atomic():
        task = task_lock(task_id=task_id)
        review = ReviewRequest.objects.select_for_update().get(id=review_id)
        review.task = task
        if review.kind != VERSION_DRIFT:
            raise ReviewInvalid(
                f"{decision} applies to reviews of kind version_drift",
                errors=[{"field": "decision", "message": "not for this review's kind"}],
            )
        now = decision_check_open(review=review, task=task, seen_hash=arguments_hash)
        if decision == "continue":
            return _continue(
                task=task,
                review=review,
                user=user,
                arguments=arguments,
                comment=comment,
                now=now,
                via=via,
            )
        return _choose(
            task=task,
            review=review,
            user=user,
            decision=decision,
            migration=migration,
            checkpoint_id=checkpoint_id,
            comment=comment,
            now=now,
            via=via,
        )


def _continue(
    *,
    task: Task,
    review: ReviewRequest,
    user: User,
    arguments: dict[str, Any] | None,
    comment: str,
    now: Any,
    via: str,
) -> ReviewRequest:
    """Go on with the new code: the (edited) arguments must fit the new schema and the policy;
    approved as any approval (four-eyes, approvals_required), then the task is requeued and the
    call runs under the new code. Caller holds both locks."""
    approved = review.arguments if arguments is None else arguments
    edit_policy = drift_edit_check(review=review, arguments=approved)
    edited = arguments is not None and canonical_hash(arguments) != canonical_hash(review.arguments)
    if edited:
        review.edited_arguments = arguments
        review.edited_by = user
        review.edited_at = now
        if edit_policy is not None:
            edit_tighten(review=review, edit=edit_policy)
    approver_check(review=review, task=task, user=user, act="approve its calls", what="this call")
    review.choice = {"decision": "continue", "edited": edited}
    review.save(
        update_fields=[
            "edited_arguments",
            "edited_by",
            "edited_at",
            "approvals_required",
            "forbid_creator",
            "matched_rules",
            "choice",
        ]
    )
    approved_hash = canonical_hash(approved)
    if not approval_add(
        task=task,
        review=review,
        user=user,
        arguments_hash=approved_hash,
        comment=comment,
        now=now,
        via=via,
        decision="continue",
        event={"kind": VERSION_DRIFT, "decision": "continue", "arguments": approved},
        before={"arguments": review.original_arguments},
        after={"decision": "continue", "arguments": approved},
    ):
        return review
    return review_settle(
        task=task,
        review=review,
        user=user,
        status=ReviewStatus.APPROVED,
        comment=comment,
        reason="continue with the new code",
        approved=approved,
        now=now,
        via=via,
        choice="continue",
    )


def _choose(
    *,
    task: Task,
    review: ReviewRequest,
    user: User,
    decision: str,
    migration: str | None,
    checkpoint_id: Any,
    comment: str,
    now: Any,
    via: str,
) -> ReviewRequest:
    """migrate, restart or cancel: nothing of the call runs as it is, so one operator decides.
    The call closes (rejected, with what was chosen instead), the review records the choice;
    then the task goes on: requeued to migrate, rolled back to restart, or canceled."""
    choice = choice_close(
        task=task,
        review=review,
        user=user,
        decision=decision,
        migration=migration,
        checkpoint_id=checkpoint_id,
        comment=comment,
        now=now,
        via=via,
    )
    actor = user.get_username()
    if decision == "migrate":
        task_resume_when_decided(
            task=task, review=review, actor=actor, now=now, reason=f"migrate: {migration}"
        )
    elif decision == "cancel":
        task_transition(
            task_id=task.id,
            to=TaskStatus.CANCELED,
            actor=actor,
            reason=f"canceled by {actor} after the code changed under {review.tool}",
            expect_from=[TaskStatus.WAITING_REVIEW],
            locked=task,
            fields={"error_class": "canceled", "error_message": comment or "version drift"},
        )
    else:
        # checkpoints answers (checkpoints.recovery): a rollback to the chosen checkpoint,
        # resumed, in this transaction; what it refuses is refused here.
        for _receiver, refused in restart_requested.send(
            sender=None,
            task_id=task.id,
            checkpoint_id=choice["checkpoint_id"],
            user=user,
            reason=f"restart after the code changed under {review.tool}: {comment}"[:2000],
        ):
            if refused:
                # django-stubs types a receiver's answer as str; checkpoints' answers a
                # refusal as (field, message).
                field, message = cast("tuple[str, str]", refused)
                if field:
                    raise ReviewInvalid(message, errors=[{"field": field, "message": message}])
                raise ReviewConflict(message)
    return review
