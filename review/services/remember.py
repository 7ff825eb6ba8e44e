"""An approval remembered as a standing rule (review_decide's `remember`): its fields checked
before any lock, the suggestion it names recomputed from the review, the rule created."""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import User
from django.utils import timezone

from review import standing
from review.models import ReviewRequest, ReviewRule, RuleAction, RuleKind, RuleScope
from review.services.errors import ReviewInvalid
from tasks.canonical import canonical_hash
from tasks.models import Task
from tasks.services import audit_record


def _remember_invalid(field: str, message: str) -> ReviewInvalid:
    return ReviewInvalid(
        f"{field}: {message}", errors=[{"field": f"remember.{field}", "message": message}]
    )


def remember_fields(
    *, remember: dict[str, Any] | None, decision: str
) -> tuple[str, datetime, str] | None:
    """(suggestion id, until, scope) of a decision's `remember`, checked before any lock.
    `until` defaults to DEFAULT_DAYS (30) from now; scope `everyone` needs `confirm_scope`
    naming it."""
    if remember is None:
        return None
    if decision != "approve":
        raise ReviewInvalid(
            "only an approval can be remembered",
            errors=[{"field": "remember", "message": "only with decision approve"}],
        )
    wanted = remember.get("suggestion")
    if not isinstance(wanted, str) or not wanted:
        raise _remember_invalid("suggestion", "required: the id of one of suggested_rules")
    scope = remember.get("scope") or RuleScope.CREATOR
    if scope not in RuleScope.values:
        raise _remember_invalid("scope", " | ".join(RuleScope.values))
    if scope == RuleScope.EVERYONE and remember.get("confirm_scope") != RuleScope.EVERYONE:
        # A rule for everyone's tasks approves calls in other people's tasks: say so twice.
        raise _remember_invalid(
            "confirm_scope",
            "confirm it: a rule for everyone's tasks approves matching calls in every user's "
            'tasks (send "confirm_scope": "everyone")',
        )
    now = timezone.now()
    given = remember.get("until")
    if given is None or (isinstance(given, str) and not given.strip()):
        return wanted, now + timedelta(days=standing.DEFAULT_DAYS), scope
    try:
        until = standing.until_parse(given, now=now)
    except ValueError as exc:
        raise _remember_invalid("until", str(exc)) from None
    return wanted, until, scope


def remember_suggestion(
    *, review: ReviewRequest, approved: dict[str, Any], wanted: str
) -> standing.Suggestion:
    """The suggestion a remember names, recomputed from this review's call (a client names
    one, never sends rule fields); only for the call as proposed. Caller holds the lock."""
    if not standing.review_rememberable(review):
        raise _remember_invalid(
            "suggestion",
            "this review cannot become a standing rule (it needs "
            f"{review.approvals_required} approvals, or is not a policy review of a call)",
        )
    if canonical_hash(approved) != canonical_hash(review.original_arguments):
        raise _remember_invalid(
            "suggestion", "a standing rule is made from the call as proposed, not an edit"
        )
    for suggestion in standing.review_suggestions(review):
        if suggestion.id == wanted:
            return suggestion
    raise _remember_invalid("suggestion", "not one of this review's suggested_rules")


def standing_rule_create(
    *,
    review: ReviewRequest,
    task: Task,
    user: User,
    suggestion: standing.Suggestion,
    until: datetime,
    scope: str,
    now: datetime,
) -> ReviewRule:
    if scope == RuleScope.CREATOR and task.created_by_id is None:
        raise _remember_invalid("scope", "this task has no creator; choose everyone")
    name = f"standing-{review.id}"
    if ReviewRule.objects.filter(name=name).exists():  # an admin's rule took the name
        name = f"{name}-{secrets.token_hex(3)}"
    rule = ReviewRule.objects.create(
        name=name,
        kind=RuleKind.STANDING,
        position=0,
        action=RuleAction.ALLOW,
        reason=suggestion.description[:200],
        **suggestion.rule_fields(),
        origin_review=review,
        created_by=user,
        scope=scope,
        scope_user_id=task.created_by_id if scope == RuleScope.CREATOR else None,
        until=until,
        created_at=now,
    )
    audit_record(
        user=user,
        action="standing_rule_create",
        task_id=task.id,
        target=f"standing rule {rule.name}",
        reason=suggestion.description,
        after={
            "rule": rule.name,
            "review": review.id,
            **suggestion.rule_fields(),
            "scope": scope,
            "scope_user": task.created_by.get_username()
            if scope == RuleScope.CREATOR and task.created_by
            else None,
            "until": until.isoformat(),
        },
    )
    return rule
