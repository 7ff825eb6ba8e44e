"""A standing rule's kill switch: pause (until an operator resumes it), resume, and revoke (for
good: a revoked rule is never resumed). An operator's switch needs a reason, is audited and
receipted (review.receipts.rule_receipt_record, in the decisions' chain), and holds from the
next call: review.standing matches at call time and skips paused and revoked rules, and a call
a rule approved in an earlier job is checked again before it runs (review.recheck)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from review.models import ReceiptVia, ReviewRule, RuleKind
from review.receipts import rule_receipt_record
from review.selectors.access import user_can_decide
from review.services.errors import ReviewConflict, ReviewForbidden, ReviewInvalid
from tasks.errors import NotFound
from tasks.services import audit_record

REASON_MAX = 300


def _reason(reason: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise ReviewInvalid(
            "reason: say why", errors=[{"field": "reason", "message": "required: say why"}]
        )
    return reason[:REASON_MAX]


def _operator(user: User, what: str) -> None:
    if not user_can_decide(user):
        raise ReviewForbidden(f"only operators may {what} standing rules")


def _locked(rule_id: Any) -> ReviewRule:
    # Lock order: the rule's row, then the receipt chain head (rule_receipt_record).
    try:
        return ReviewRule.objects.select_for_update().get(pk=rule_id, kind=RuleKind.STANDING)
    except (ReviewRule.DoesNotExist, ValueError, TypeError):
        raise NotFound("standing rule not found") from None


def standing_rule_pause(
    *,
    rule_id: Any,
    reason: str,
    user: User | None = None,
    cause: str = "manual",
    via: str = ReceiptVia.API,
) -> bool:
    """Pause a standing rule: it allows nothing (its calls go to review) until an operator
    resumes it. A conditional UPDATE, so of concurrent pauses one records it. -> paused now
    (False: it was paused or revoked already). With no `user` the rule pauses itself (a call
    it allowed went wrong): audited, not receipted; an operator's pause needs a reason
    (ReviewInvalid), is audited and receipted."""
    if user is not None:
        _operator(user, "pause")
        reason = _reason(reason)
    now = timezone.now()
    reason = reason[:REASON_MAX]
    with transaction.atomic():
        if (
            ReviewRule.objects.filter(
                pk=rule_id, kind=RuleKind.STANDING, paused=False, revoked_at__isnull=True
            ).update(paused=True, paused_reason=reason, paused_at=now)
            != 1
        ):
            return False
        rule = ReviewRule.objects.get(pk=rule_id)
        audit_record(
            user=user,
            actor_name="" if user is not None else f"standing rule {rule.name}",
            action="standing_rule_pause",
            target=f"standing rule {rule.name}",
            reason=reason,
            before={"paused": False},
            after={"paused": True, "cause": cause},
        )
        if user is not None:
            rule_receipt_record(rule=rule, decision="rule_pause", user=user, via=via, reason=reason)
    return True


def standing_rule_resume(
    *, rule_id: Any, user: User, reason: str = "", via: str = ReceiptVia.API
) -> ReviewRule:
    """An operator trusts a paused standing rule again. Raises ReviewForbidden (not an
    operator), ReviewConflict (not paused, revoked, or past its `until`)."""
    _operator(user, "resume")
    reason = (reason or "").strip()[:REASON_MAX]
    with transaction.atomic():
        rule = _locked(rule_id)
        if rule.revoked_at is not None:
            raise ReviewConflict(f"standing rule {rule.name} was revoked; a revoked rule stays so")
        if not rule.paused:
            raise ReviewConflict(f"standing rule {rule.name} is not paused")
        if rule.until is None or rule.until <= timezone.now():
            raise ReviewConflict(f"standing rule {rule.name} has ended; make a new one")
        before = {"paused": True, "paused_reason": rule.paused_reason}
        rule.paused, rule.paused_reason, rule.paused_at = False, "", None
        rule.save(update_fields=["paused", "paused_reason", "paused_at", "updated_at"])
        audit_record(
            user=user,
            action="standing_rule_resume",
            target=f"standing rule {rule.name}",
            reason=reason,
            before=before,
            after={"paused": False},
        )
        rule_receipt_record(rule=rule, decision="rule_resume", user=user, via=via, reason=reason)
    return rule


def standing_rule_revoke(
    *, rule_id: Any, user: User, reason: str, via: str = ReceiptVia.API
) -> ReviewRule:
    """Revoke a standing rule for good, whatever its state: it never allows a call again and
    can never be resumed (a new rule must be made from a review). Raises ReviewForbidden (not
    an operator), ReviewInvalid (no reason), ReviewConflict (revoked already)."""
    _operator(user, "revoke")
    reason = _reason(reason)
    with transaction.atomic():
        rule = _locked(rule_id)
        if rule.revoked_at is not None:
            raise ReviewConflict(f"standing rule {rule.name} is revoked already")
        before = {"state": rule.standing_state}
        rule.revoked_at, rule.revoked_reason, rule.revoked_by = timezone.now(), reason, user
        rule.save(update_fields=["revoked_at", "revoked_reason", "revoked_by", "updated_at"])
        audit_record(
            user=user,
            action="standing_rule_revoke",
            target=f"standing rule {rule.name}",
            reason=reason,
            before=before,
            after={"state": "revoked"},
        )
        rule_receipt_record(rule=rule, decision="rule_revoke", user=user, via=via, reason=reason)
    return rule
