"""Decision receipts: an append-only hash chain of every decision on a review.

Every way a review is decided writes exactly one receipt in the decision's own transaction
(`receipt_record`): who (a user's id and username, or a system label), when, what (the review,
its task and call, the tool, the hashes of the proposed and approved arguments, the target
fingerprint and the policy hash) and the decision. Each receipt carries the hash of the one
before it, and its own hash is the sha256 of the canonical JSON of its document
(`receipt_document` without "hash"), so editing, deleting or reordering a row breaks the chain
and `receipts_verify` (`manage.py verify_receipts`) names the first receipt that does not
verify. The chain head row (ReceiptChainHead) is locked for every append: concurrent
decisions take consecutive sequence numbers, and a deleted newest receipt shows against it.

What it does not stop: someone who can write the database and recomputes every hash after
theirs. Export the chain (`GET /api/v1/receipts?since=`) elsewhere to anchor it; an exported
line verifies on its own (drop "hash", hash the canonical JSON of the rest).

An operator's pause, resume or revoke of a standing rule is receipted in the same chain
(`rule_receipt_record`: no review or task; the subject names the rule)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.contrib.auth.models import User
from django.utils import timezone

from review.models import DecisionReceipt, ReceiptChainHead, ReviewRequest, ReviewRule
from tasks.canonical import canonical_hash, nul_free

GENESIS_HASH = "0" * 64
CHAIN_HEAD_ID = 1

# The decisions a receipt records, each once per occurrence:
RECEIPT_DECISIONS = (
    "approve",  # the approval that approved the call (the last of approvals_required)
    "approve_partial",  # one operator's approval while more are required
    "reject",
    "respond",  # an answer to a LangGraph interrupt
    "mark_done",  # outcome unknown: the operator says it took effect
    "rerun",  # outcome unknown: run it again with the same idempotency key
    "rerun_partial",  # one operator's re-run approval while more are required
    "fail_task",  # outcome unknown: the task fails
    "expire",  # nobody decided before expires_at (the sweep)
    # the review closed undecided: its task was canceled, retried or rolled back, or its
    # targets changed before an approval (it reopens as a new review)
    "cancel",
    # a version_drift review (the code changed under the paused call): go on with the new code
    # (and one operator's such approval while more are required), apply a registered
    # migration, restart from an earlier checkpoint; its `cancel` is the task canceled (the
    # receipt's subject carries the review's `choice`)
    "continue",
    "continue_partial",
    "migrate",
    "restart",
)
# An operator's kill switch on a standing rule (review.services.rule_switch): receipts with no
# review or task, whose subject names the rule (`rule_subject`).
RULE_DECISIONS = ("rule_pause", "rule_resume", "rule_revoke")


def _subject(
    *, review: ReviewRequest, comment: str, approvals: list[str] | None = None
) -> dict[str, Any]:
    if approvals is None:
        approvals = list(
            review.approvals.order_by("at", "id").values_list("user__username", flat=True)
        )
    subject: dict[str, Any] = nul_free(
        {
            "tool": review.tool,
            "kind": review.kind,
            "call_id": review.tool_call.call_id,
            "status": review.status,
            "proposed_arguments_hash": canonical_hash(review.original_arguments),
            "arguments_hash": canonical_hash(review.arguments),
            "edited": review.edited_arguments is not None,
            "target_fingerprint": review.target_fingerprint,
            "policy_hash": review.policy_hash,
            "rules": review.rule_names,
            "approvals": approvals,
            "approvals_required": review.approvals_required,
            "comment": comment,
            **({"choice": review.choice} if review.choice is not None else {}),
        }
    )
    return subject


def receipt_document(receipt: DecisionReceipt) -> dict[str, Any]:
    """The receipt as the API and the export show it; its "hash" is the canonical hash of
    the rest."""
    return {**_hashed(receipt), "hash": receipt.hash}


def _hashed(receipt: DecisionReceipt) -> dict[str, Any]:
    return {
        "seq": receipt.seq,
        "at": receipt.at.astimezone(UTC).isoformat(),
        "review_id": receipt.review_id,
        "task_id": str(receipt.task_id) if receipt.task_id is not None else None,
        "decision": receipt.decision,
        "via": receipt.via,
        "actor": receipt.actor,
        "actor_user_id": receipt.actor_user_id,
        "subject": receipt.subject,
        "prev_hash": receipt.prev_hash,
    }


def receipt_chain_lock() -> ReceiptChainHead:
    # The lock every append takes (and holds until its decision commits): appends are
    # serialised deployment-wide, after the task and review locks the decision already holds
    # (lock order: task, review, chain head). The row is created on first use; of two first
    # appends, the second waits on the insert's unique key and then locks the same row.
    head = ReceiptChainHead.objects.select_for_update().filter(pk=CHAIN_HEAD_ID).first()
    if head is None:
        ReceiptChainHead.objects.bulk_create(
            [ReceiptChainHead(pk=CHAIN_HEAD_ID)], ignore_conflicts=True
        )
        head = ReceiptChainHead.objects.select_for_update().get(pk=CHAIN_HEAD_ID)
    return head


def receipt_record(
    *,
    review: ReviewRequest,
    decision: str,
    actor: str,
    user: User | None = None,
    via: str,
    now: datetime,
    comment: str = "",
) -> DecisionReceipt:
    """Append the receipt of `decision` on `review` (as it stands after the decision) to the
    chain. Call it inside the decision's transaction, after the review changed: the receipt
    commits or rolls back with the decision. `actor` is the deciding user's username or a
    system label ("system:sweep"; a standing rule's "rule:NAME")."""
    return _append(
        receipt_build(
            review=review,
            decision=decision,
            actor=actor,
            user=user,
            via=via,
            now=now,
            comment=comment,
        )
    )


def receipt_build(
    *,
    review: ReviewRequest,
    decision: str,
    actor: str,
    user: User | None = None,
    via: str,
    now: datetime,
    comment: str = "",
    approvals: list[str] | None = None,
) -> DecisionReceipt:
    """The receipt receipt_record appends, not yet on the chain (receipt_link puts it there).
    `approvals`: the usernames of the review's approvals in their order, if the caller knows
    them (else they are read)."""
    if decision not in RECEIPT_DECISIONS:
        raise ValueError(f"unknown decision {decision!r} for a receipt")
    return DecisionReceipt(
        at=now,
        review_id=review.id,
        task_id=review.task_id,
        decision=decision,
        via=via,
        actor=actor[:150],
        actor_user_id=user.pk if user is not None else None,
        subject=_subject(review=review, comment=comment, approvals=approvals),
    )


def receipt_link(receipt: DecisionReceipt, *, head_seq: int, head_hash: str) -> ReceiptChainHead:
    """Put the unsaved `receipt` after the chain's head (`head_seq`, `head_hash`, read under
    the head's lock, which the caller's transaction holds) and -> the head as it is once the
    receipt is inserted: the caller saves both (seq, hash) in that transaction."""
    receipt.seq, receipt.prev_hash = head_seq + 1, head_hash or GENESIS_HASH
    receipt.hash = canonical_hash(_hashed(receipt))
    return ReceiptChainHead(pk=CHAIN_HEAD_ID, seq=receipt.seq, hash=receipt.hash)


def rule_subject(rule: ReviewRule, *, reason: str) -> dict[str, Any]:
    """What a kill-switch receipt is about: the rule, what it matched, its state after."""
    subject: dict[str, Any] = nul_free(
        {
            "standing_rule": rule.name,
            "rule_id": rule.id,
            "tool": rule.tool,
            "path_glob": rule.path_glob,
            "command_regex": rule.command_regex,
            "url_origin": rule.url_origin,
            "arguments_hash": rule.arguments_hash,
            "pinned_arguments": rule.pinned_arguments,
            "scope": rule.scope,
            "until": rule.until.astimezone(UTC).isoformat() if rule.until else None,
            "origin_review_id": rule.origin_review_id,
            "state": rule.standing_state,
            "reason": reason,
        }
    )
    return subject


def rule_receipt_record(
    *, rule: ReviewRule, decision: str, user: User, via: str, reason: str
) -> DecisionReceipt:
    """Append the receipt of an operator's pause, resume or revoke of a standing rule (as it
    stands after it), inside that action's transaction."""
    if decision not in RULE_DECISIONS:
        raise ValueError(f"unknown decision {decision!r} for a rule receipt")
    return _append(
        DecisionReceipt(
            at=timezone.now(),
            review_id=None,
            task_id=None,
            decision=decision,
            via=via,
            actor=user.get_username()[:150],
            actor_user_id=user.pk,
            subject=rule_subject(rule, reason=reason),
        )
    )


def _append(receipt: DecisionReceipt) -> DecisionReceipt:
    head = receipt_chain_lock()
    linked = receipt_link(receipt, head_seq=head.seq, head_hash=head.hash)
    receipt.save(force_insert=True)
    head.seq, head.hash = linked.seq, linked.hash
    head.save(update_fields=["seq", "hash"])
    return receipt


@dataclass(frozen=True)
class ReceiptProblem:
    seq: int
    message: str

    def __str__(self) -> str:
        return f"receipt {self.seq}: {self.message}"


def receipts_verify() -> tuple[int, ReceiptProblem | None]:
    """Walk the chain in order: how many receipts verified, and the first that does not (its
    content does not match its hash, its prev_hash does not match the receipt before it, a
    sequence number is missing, or the chain ends before its head)."""
    checked = 0
    prev_hash = GENESIS_HASH
    for receipt in DecisionReceipt.objects.order_by("seq").iterator(chunk_size=2000):
        expected = checked + 1
        if receipt.seq != expected:
            return checked, ReceiptProblem(
                expected,
                f"missing (the chain goes from {checked} to {receipt.seq}): deleted or renumbered",
            )
        if canonical_hash(_hashed(receipt)) != receipt.hash:
            return checked, ReceiptProblem(
                receipt.seq,
                f"its content does not match its hash (edited; review {receipt.review_id})",
            )
        if receipt.prev_hash != prev_hash:
            return checked, ReceiptProblem(
                receipt.seq,
                f"its prev_hash does not match receipt {checked}'s hash "
                "(that receipt was edited, replaced or reordered)",
            )
        prev_hash = receipt.hash
        checked += 1
    head = ReceiptChainHead.objects.filter(pk=CHAIN_HEAD_ID).first()
    head_seq, head_hash = (head.seq, head.hash or GENESIS_HASH) if head else (0, GENESIS_HASH)
    if head is None and checked:
        return checked, ReceiptProblem(checked, "the chain head row is missing")
    if head_seq != checked or head_hash != prev_hash:
        return checked, ReceiptProblem(
            checked + 1 if head_seq > checked else head_seq,
            f"the chain ends at {checked} but its head says {head_seq}: "
            "the newest receipts were deleted or the head was changed",
        )
    return checked, None
