"""Read-side queries for reviews, and who may decide them."""

from __future__ import annotations

import difflib
import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, Group
from django.db import connection
from django.db.models import (
    Case,
    CharField,
    Count,
    DateTimeField,
    Exists,
    F,
    IntegerField,
    Max,
    OuterRef,
    Q,
    QuerySet,
    Value,
    When,
)
from django.utils import timezone
from pydantic import ValidationError

from harness_base.config import harness_config
from harness_base.metrics import label_bounded
from review.models import (
    DecisionReceipt,
    Notification,
    NotificationStatus,
    ReviewApproval,
    ReviewComment,
    ReviewRequest,
    ReviewRule,
    ReviewStatus,
    RuleKind,
)
from review.transports import LEGACY_WEBHOOK, LegacyWebhook, transport_for
from tasks.canonical import canonical_hash
from tasks.errors import CANCELED_ERROR, NotFound
from tasks.models import ToolCallStatus
from tasks.paths import PathEscapeError, call_paths, shared_relative, validate_relative_path
from tasks.selectors import user_can_view, user_in_group
from tasks.tools.mcp import MCP_DEFAULT_HINTS
from tasks.tools.registry import ToolSpec


def user_can_decide(user: AbstractBaseUser | None) -> bool:
    """Members of `operators`, holders of `review.decide_review` and superusers decide;
    everyone else (viewers) only reads."""
    if user is None or not user_can_view(user):
        return False
    if user.is_superuser or user_in_group(user, ("operators",)):  # groups first: see user_can_view
        return True
    return user.has_perm("review.decide_review")


# How many new reviews one summary lists (the browser announces and notifies these).
SUMMARY_NEW_LIMIT = 10


def _not_decidable_by(user: AbstractBaseUser) -> Q:
    """Pending reviews `user` may not decide: the creator under the creator ban, or one
    they already approved (another operator must)."""
    approved = ReviewApproval.objects.filter(review=OuterRef("pk"), user_id=user.pk)
    return Q(forbid_creator=True, task__created_by_id=user.pk) | Q(Exists(approved))


def reviews_summary(*, user: AbstractBaseUser, since: int | None = None) -> dict[str, Any]:
    """What the navigation shows `user` live: pending reviews (every role reads them all),
    how many of those `user` may decide, the newest pending id, and the pending reviews
    newer than `since` (oldest first, at most SUMMARY_NEW_LIMIT) each with whether `user`
    may decide it. One aggregate query, plus one for the new ones when `since` is given."""
    pending = ReviewRequest.objects.filter(status=ReviewStatus.PENDING)
    decides = user_can_decide(user)
    blocked = _not_decidable_by(user)
    totals = pending.aggregate(
        pending=Count("id"),
        latest=Max("id"),
        decidable=Count("id", filter=~blocked),
    )
    new: list[dict[str, Any]] = []
    if since is not None and (totals["latest"] or 0) > since:
        rows = (
            pending.filter(id__gt=since)
            .annotate(blocked=Case(When(blocked, then=Value(True)), default=Value(False)))
            .order_by("id")
            .values("id", "tool", "task_id", "task__title", "blocked")[:SUMMARY_NEW_LIMIT]
        )
        new = [
            {
                "id": row["id"],
                "tool": row["tool"],
                "task_id": str(row["task_id"]),
                "task": row["task__title"],
                "decidable": decides and not row["blocked"],
            }
            for row in rows
        ]
    return {
        "pending": totals["pending"],
        "decidable": totals["decidable"] if decides else 0,
        "latest": totals["latest"] or 0,
        "new": new,
    }


# The inbox's sorts (`sort=`), each applied to the pending reviews; decided ones follow, most
# recently decided first. `age`: oldest first (the longest wait is the most urgent).
REVIEW_SORTS = ("age", "newest", "time_left", "risk", "tool")
# Highest risk first for `sort=risk`.
RISK_RANK = {"destructive": 0, "external": 1, "execute": 2, "write": 3, "read": 4}
# `claimed_by=` takes a username, or this for the unclaimed ones.
NOBODY = "nobody"


def _pending(value: Any, output: Any) -> Case:
    return Case(When(status=ReviewStatus.PENDING, then=value), default=None, output_field=output)


def _sort_keys(sort: str) -> list[Any]:
    at = _pending(F("requested_at"), DateTimeField())
    if sort == "newest":
        return [at.desc(nulls_last=True), F("id").desc()]
    keys: list[Any] = []
    if sort == "time_left":
        keys = [_pending(F("expires_at"), DateTimeField()).asc(nulls_last=True)]
    elif sort == "risk":
        rank = Case(
            *(
                When(status=ReviewStatus.PENDING, risk=risk, then=Value(position))
                for risk, position in RISK_RANK.items()
            ),
            When(status=ReviewStatus.PENDING, then=Value(len(RISK_RANK))),
            default=None,
            output_field=IntegerField(),
        )
        keys = [rank.asc(nulls_last=True)]
    elif sort == "tool":
        keys = [_pending(F("tool"), CharField()).asc(nulls_last=True)]
    return [*keys, at.asc(nulls_last=True), F("id").asc()]


def _rule_filter(rule: str) -> Q:
    """Reviews one of whose matched rules is named `rule`."""
    if connection.features.supports_json_field_contains:
        return Q(matched_rules__contains=[{"name": rule}])
    # SQLite (`./harness up` without DATABASE_URL): the stored JSON text holds the name.
    return Q(matched_rules__icontains=json.dumps({"name": rule})[1:-1])


def reviews_list(
    *,
    status: str | None = None,
    tool: str | None = None,
    risk: str | None = None,
    task: str | None = None,
    rule: str | None = None,
    claimed_by: str | None = None,
    assigned_to: AbstractBaseUser | None = None,
    sort: str = "age",
) -> QuerySet[ReviewRequest]:
    """Pending first, in `sort` order (REVIEW_SORTS; default oldest first), then decided ones,
    most recently decided first. `status` is comma-separated; `task` is a task id or a piece
    of its title; `rule` a matched rule's name; `claimed_by` a username or NOBODY;
    `assigned_to` a user: the reviews assigned to them or to one of their groups."""
    qs = ReviewRequest.objects.select_related(
        "task",
        "task__parent",
        "tool_call",
        "decided_by",
        "standing_rule",
        "claimed_by",
        "assigned_to",
        "assigned_group",
    )
    if status:
        qs = qs.filter(status__in=[s for s in status.split(",") if s])
    if tool:
        qs = qs.filter(tool=tool)
    if risk:
        qs = qs.filter(risk=risk)
    if rule:
        qs = qs.filter(_rule_filter(rule))
    if claimed_by == NOBODY:
        qs = qs.filter(claimed_by__isnull=True)
    elif claimed_by:
        qs = qs.filter(claimed_by__username=claimed_by)
    if assigned_to is not None:
        qs = qs.filter(Q(assigned_to=assigned_to) | Q(assigned_group__in=assigned_to.groups.all()))
    if task:
        try:
            qs = qs.filter(task_id=uuid.UUID(task))
        except ValueError:
            qs = qs.filter(task__title__icontains=task)
    pending_first = Case(
        When(status=ReviewStatus.PENDING, then=Value(0)),
        default=Value(1),
        output_field=IntegerField(),
    )
    return qs.annotate(pending_first=pending_first).order_by(
        "pending_first", *_sort_keys(sort), "-decided_at", "-id"
    )


# How far "next review" and j/k look along the inbox's order.
ORDER_WINDOW = 1000


def reviews_pending_order(**filters: Any) -> list[int]:
    """The ids of the pending reviews the inbox shows with these filters, in its order (at
    most ORDER_WINDOW): what j/k walk and "next review" picks from."""
    return list(
        reviews_list(**filters, status=ReviewStatus.PENDING).values_list("id", flat=True)[
            :ORDER_WINDOW
        ]
    )


def review_neighbours(*, order: list[int], review_id: int) -> tuple[int | None, int | None]:
    """(previous, next) of a review along `order`; for one not in it, (None, the first)."""
    if review_id not in order:
        return None, order[0] if order else None
    at = order.index(review_id)
    return (order[at - 1] if at else None), (order[at + 1] if at + 1 < len(order) else None)


def review_next_decidable(*, user: AbstractBaseUser, order: list[int], after: int) -> int | None:
    """The first review after `after` along `order` (wrapping around) that `user` may decide
    now: still pending, not expired, not already approved by them, not their own task's under
    forbid-creator. None when there is none (or the user decides nothing)."""
    if not user_can_decide(user):
        return None
    at = order.index(after) + 1 if after in order else 0
    candidates = [i for i in order[at:] + order[:at] if i != after]
    decidable = set(
        ReviewRequest.objects.filter(id__in=candidates, status=ReviewStatus.PENDING)
        .exclude(expires_at__lte=timezone.now())
        .exclude(approvals__user=user)
        .exclude(forbid_creator=True, task__created_by=user)
        .values_list("id", flat=True)
    )
    return next((i for i in candidates if i in decidable), None)


def reviews_rules() -> list[str]:
    """The names of the rules that paused the pending reviews (the inbox's rule filter)."""
    names: set[str] = set()
    for rules in ReviewRequest.objects.filter(status=ReviewStatus.PENDING).values_list(
        "matched_rules", flat=True
    )[:ORDER_WINDOW]:
        names.update(
            str(r.get("name")) for r in rules or [] if isinstance(r, dict) and r.get("name")
        )
    return sorted(names)


def review_comments(*, review: ReviewRequest) -> QuerySet[ReviewComment]:
    return review.comments.select_related("user")


def operators_and_groups() -> tuple[list[str], list[str]]:
    """Who a review can be assigned to: the usernames of those who may decide, and the
    groups' names."""
    users = [
        u
        for u in get_user_model()
        .objects.filter(is_active=True)
        .filter(
            Q(is_superuser=True)
            | Q(groups__name="operators")
            | Q(user_permissions__codename="decide_review")
            | Q(groups__permissions__codename="decide_review")
        )
        .distinct()
        .order_by("username")[:ORDER_WINDOW]
    ]
    return [u.get_username() for u in users], list(
        Group.objects.order_by("name").values_list("name", flat=True)
    )


def reviews_tools() -> list[str]:
    return list(ReviewRequest.objects.order_by("tool").values_list("tool", flat=True).distinct())


def review_url(*, review_id: Any) -> str:
    """The review page, at HARNESS_BASE_URL (links in the API and in notifications)."""
    return f"{settings.HARNESS_BASE_URL.rstrip('/')}/reviews/{review_id}/"


def access_review(user: AbstractBaseUser, review_id: Any, *, related: bool = True) -> ReviewRequest:
    """The review `user` may read; `NotFound` for an unknown or malformed id, or a user
    without a role. `related=False`: only its id, for a service that reads (and locks) what it
    needs itself, e.g. a decision, without the rows a page shows with it."""
    if not user_can_view(user):
        raise NotFound("review not found")
    rows = (
        ReviewRequest.objects.select_related(
            "task",
            "task__created_by",
            "tool_call",
            "checkpoint",
            "decided_by",
            "standing_rule",
            "claimed_by",
            "assigned_to",
            "assigned_group",
        )
        if related
        else ReviewRequest.objects.only("id")
    )
    try:
        return rows.get(id=int(review_id))
    except (ReviewRequest.DoesNotExist, ValueError, TypeError):
        raise NotFound("review not found") from None


def _target_state(target: dict[str, Any]) -> str:
    if "unverified" in target:
        return "(could not be read)"
    if "refused" in target:
        return "(refused by the tool)"
    if target["kind"] == "file":
        sha = target.get("sha256")
        return f"sha256 {sha[:12]}" if sha else "(absent)"
    if target["kind"] in ("folder", "workspace"):
        return f"{target.get('files')} files, tree {str(target.get('tree'))[:12]}"
    if target["kind"] == "http":
        return f"{target.get('method')} via {target.get('address')}"
    if target["kind"] == "mcp":
        return f"tool list {str(target.get('tool_list'))[:12]}"
    return ""


def review_targets_text(*, review: ReviewRequest) -> list[dict[str, str]]:
    """The recorded targets of a review as the page shows them: {key, state}."""
    return [
        {"key": str(t.get("key", "")), "state": _target_state(t)}
        for t in review.target_fingerprint.get("targets") or []
        if t.get("kind") != "command"
    ]


def review_file_paths(*, review: ReviewRequest) -> list[str]:
    """The workspace files the call names (its path arguments), as a snapshot's manifest
    spells them, for "see the current file" links; paths the tools would refuse and
    /shared/ paths (not in the task's workspace) are left out."""
    paths = []
    for path in call_paths(review.arguments):
        if shared_relative(path) is not None:
            continue
        try:
            paths.append(str(validate_relative_path(path)))
        except PathEscapeError:
            continue
    return list(dict.fromkeys(paths))


def review_approvers(*, review: ReviewRequest) -> list[dict[str, Any]]:
    return [
        {
            "user": a.user.get_username(),
            "at": a.at,
            "arguments_hash": a.arguments_hash,
            "comment": a.comment,
        }
        for a in review.approvals.select_related("user")
    ]


_MATCHERS = (
    ("tool", "tool is {}"),
    ("risk", "risk is {}"),
    ("path_glob", "path matches {}"),
    ("command_regex", "command matches /{}/"),
    ("url_host", "URL host matches {}"),
)


def duration_text(seconds: float) -> str:
    """14400 -> "4h", 90 -> "1m 30s"."""
    seconds = int(round(seconds))
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size or (unit == "s" and not parts):
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return " ".join(parts)


@dataclass(frozen=True)
class RuleText:
    name: str
    source: str
    condition: str
    action: str
    reason: str
    extra: str


def rule_text(rule: dict[str, Any]) -> RuleText:
    """A matched rule in words, for "why was this paused?"."""
    condition = " and ".join(fmt.format(rule[key]) for key, fmt in _MATCHERS if rule.get(key))
    extra = []
    if rule.get("approvals_required", 1) > 1:
        extra.append(f"needs {rule['approvals_required']} approvals from distinct operators")
    if rule.get("forbid_creator"):
        extra.append("the task's creator may not approve")
    if rule.get("expires_after"):
        extra.append(
            f"expires after {duration_text(rule['expires_after'])}, then "
            f"{rule.get('on_expiry', 'reject')}"
        )
    return RuleText(
        name=rule.get("name", "?"),
        source=rule.get("source", ""),
        condition=condition or "every call",
        action=rule.get("action", "review"),
        reason=rule.get("reason", ""),
        extra="; ".join(extra),
    )


def task_reviews_pending(*, task_id: Any) -> list[ReviewRequest]:
    """A task's pending reviews, oldest first, each with `approvals_given` and
    `approvals_missing` (the task page's "waiting for your review" banner)."""
    reviews = list(
        ReviewRequest.objects.filter(task_id=task_id, status=ReviewStatus.PENDING)
        .annotate(approvals_given=Count("approvals"))
        .order_by("requested_at", "id")
    )
    for review in reviews:
        review.approvals_missing = max(1, review.approvals_required - review.approvals_given)
    return reviews


def task_reviews(*, task_id: Any) -> QuerySet[ReviewRequest]:
    """A task's review requests, oldest first, with who decided them."""
    return (
        ReviewRequest.objects.filter(task_id=task_id)
        .select_related("decided_by", "standing_rule")
        .order_by("requested_at", "id")
    )


def review_mcp_facts(*, review: ReviewRequest, tool: ToolSpec | None) -> dict[str, Any] | None:
    """What the review page shows about an MCP server's tool: the server, the tool's own name,
    its description, each annotation (declared, or MCP's default) and whether the arguments
    under review satisfy the tool's inputSchema."""
    if tool is None or not tool.server:
        return None
    declared = tool.annotations or {}
    hints = [
        {
            "name": name,
            "value": declared[name] if isinstance(declared.get(name), bool) else default,
            "declared": isinstance(declared.get(name), bool),
        }
        for name, default in MCP_DEFAULT_HINTS.items()
    ]
    try:
        tool.args_model.model_validate(review.arguments)
        schema_check = ""
    except ValidationError as exc:
        schema_check = "; ".join(str(item["msg"]) for item in exc.errors())
    return {
        "server": tool.server,
        "tool": tool.name.partition("__")[2],
        "description": tool.description,
        "title": declared.get("title", ""),
        "hints": hints,
        "risk": tool.risk,
        "idempotent": tool.idempotent,
        "schema_check": schema_check,
    }


# --- standing rules (review.standing) ---------------------------------------------------------

_ALLOWED = Q(reviews__kind="standing_rule")
# The human reviews of calls it matched and could not allow (review.services.review_gate).
_ASKED = Q(reviews__kind="policy")


def standing_rules(*, ids: list[Any] | None = None) -> QuerySet[ReviewRule]:
    """Standing rules, newest first, each with its track record counted from the reviews
    linked to it (exact: each allowance is a review of kind `standing_rule`, each call that
    matched while it could not allow is a human's review):

    - `allowed`: calls it allowed; of those `failed` (settled failed or timed out; not a
      call an operator's cancel stopped),
      `unknown_outcome` (a human had to say whether it took effect), `rolled_back`;
    - `asked_human`: calls it matched while paused (or unable to stand in); of those the
      human `edited` or `rejected`."""
    rules = ReviewRule.objects.filter(kind=RuleKind.STANDING)
    if ids is not None:
        rules = rules.filter(id__in=ids)
    return (
        rules.select_related("created_by", "scope_user", "origin_review")
        .annotate(
            allowed=Count("reviews", filter=_ALLOWED, distinct=True),
            failed=Count(
                "reviews",
                filter=_ALLOWED
                & Q(
                    reviews__tool_call__status__in=[
                        ToolCallStatus.FAILED,
                        ToolCallStatus.TIMED_OUT,
                    ]
                )
                & ~Q(reviews__tool_call__error_class=CANCELED_ERROR),
                distinct=True,
            ),
            unknown_outcome=Count(
                "reviews",
                filter=_ALLOWED & Q(reviews__tool_call__reviews__kind="unknown_outcome"),
                distinct=True,
            ),
            rolled_back=Count(
                "reviews", filter=_ALLOWED & Q(reviews__rolled_back_at__isnull=False), distinct=True
            ),
            asked_human=Count("reviews", filter=_ASKED, distinct=True),
            edited=Count(
                "reviews",
                filter=_ASKED
                & Q(reviews__status=ReviewStatus.APPROVED, reviews__edited_arguments__isnull=False),
                distinct=True,
            ),
            rejected=Count(
                "reviews", filter=_ASKED & Q(reviews__status=ReviewStatus.REJECTED), distinct=True
            ),
        )
        .order_by("-id")
    )


def standing_rules_from(*, review: ReviewRequest) -> list[ReviewRule]:
    """The standing rules made when this review was approved ("approve and always allow")."""
    return list(ReviewRule.objects.filter(kind=RuleKind.STANDING, origin_review=review))


def standing_rule_get(*, rule_id: Any) -> ReviewRule:
    try:
        return standing_rules(ids=[int(rule_id)]).get()
    except (ReviewRule.DoesNotExist, ValueError, TypeError):
        raise NotFound("standing rule not found") from None


def review_receipts(*, review: ReviewRequest) -> QuerySet[DecisionReceipt]:
    """The decision receipts of one review, oldest first (review.receipts)."""
    return DecisionReceipt.objects.filter(review_id=review.id).order_by("seq")


def receipts_since(
    *, after_seq: int | None = None, since: datetime | None = None
) -> QuerySet[DecisionReceipt]:
    """Receipts in chain order: those after sequence number `after_seq`, or made at or after
    `since` (the export; `seq` is unique, `at` indexed)."""
    qs = DecisionReceipt.objects.order_by("seq")
    if after_seq is not None:
        qs = qs.filter(seq__gt=after_seq)
    if since is not None:
        qs = qs.filter(at__gte=since)
    return qs


# --- the three facts of an edited approval ---------------------------------------------------


def arguments_diff(*, proposed: Any, approved: Any) -> str:
    """A unified diff of two argument objects as indented JSON (proposed -> approved)."""

    def lines(value: Any) -> list[str]:
        return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False).splitlines()

    return "\n".join(
        difflib.unified_diff(
            lines(proposed), lines(approved), "proposed", "approved", lineterm="", n=2
        )
    )


def review_edit(*, review: ReviewRequest) -> dict[str, Any] | None:
    """Who edited the arguments under review, with their comment and the diff proposed ->
    approved; None when nobody did. The editor is the first operator whose approval names
    the edited arguments (an approval records the hash of what it approves)."""
    if review.edited_arguments is None:
        return None
    first = (
        review.approvals.filter(arguments_hash=canonical_hash(review.edited_arguments))
        .select_related("user")
        .order_by("at", "id")
        .first()
    )
    return {
        "by": first.user.get_username() if first else "",
        "comment": first.comment if first else "",
        "at": first.at if first else None,
        "diff": arguments_diff(
            proposed=review.original_arguments, approved=review.edited_arguments
        ),
    }


def review_facts(*, review: ReviewRequest) -> dict[str, Any]:
    """The three facts of a review, each with its hash: what the model proposed, what was
    approved (with who edited it and why) and what ran. `approved` is None until the review
    is approved; `executed` is None until the call started with exactly the approved
    arguments (the loop runs nothing else)."""
    edit = review_edit(review=review)
    approved = None
    if review.status == ReviewStatus.APPROVED:
        approved = {
            "arguments": review.arguments,
            "arguments_hash": canonical_hash(review.arguments),
            "edited": edit is not None,
            "edited_by": edit["by"] if edit else None,
            "comment": edit["comment"] if edit else review.comment,
        }
    call = review.tool_call
    executed = None
    if approved is not None and call.started_at is not None:
        ran_hash = canonical_hash(call.arguments)
        if ran_hash == approved["arguments_hash"]:
            executed = {
                "arguments": call.arguments,
                "arguments_hash": ran_hash,
                "started_at": call.started_at,
                "status": call.status,
            }
    return {
        "proposed": {
            "arguments": review.original_arguments,
            "arguments_hash": canonical_hash(review.original_arguments),
        },
        "approved": approved,
        "executed": executed,
        "edit": edit,
    }


def task_call_edits(*, task_id: Any) -> dict[str, dict[str, Any]]:
    """call_id -> review_edit of the approved review that edited it, for the task's calls
    tab and timeline."""
    reviews = ReviewRequest.objects.filter(
        task_id=task_id, status=ReviewStatus.APPROVED, edited_arguments__isnull=False
    ).select_related("tool_call")
    edits = {}
    for review in reviews.order_by("decided_at", "id"):
        edit = review_edit(review=review)
        if edit is not None:
            edits[review.tool_call.call_id] = edit
    return edits


def call_edit(*, tool_call_id: Any, arguments_hash: str) -> dict[str, Any] | None:
    """The edit behind a call about to run with `arguments_hash`: review_edit of its
    approved review whose edited arguments have that hash (None: the call runs as
    proposed)."""
    for review in ReviewRequest.objects.filter(
        tool_call_id=tool_call_id, status=ReviewStatus.APPROVED, edited_arguments__isnull=False
    ).order_by("-decided_at", "-id"):
        if canonical_hash(review.edited_arguments) == arguments_hash:
            return review_edit(review=review)
    return None


def review_notifications(*, review: ReviewRequest) -> list[dict[str, Any]]:
    """The review's notifications, oldest first: {channel, kind, event, status, attempts,
    last_error, sent_at, next_attempt_at}."""
    return list(
        Notification.objects.filter(review_id=review.id).values(
            "channel",
            "kind",
            "event",
            "status",
            "attempts",
            "last_error",
            "sent_at",
            "next_attempt_at",
        )
    )


def notification_channels_health() -> list[dict[str, Any]]:
    """Each configured channel for /ops/: its kind, the environment variables it needs that
    this process lacks, when it last delivered, and its failed attempts since then (newest
    rows first along `notification_channel`); `failing` once they reach
    HARNESS_NOTIFY_FAILING_AFTER."""
    config = harness_config()
    transports = {
        name: transport_for(channel) for name, channel in config.notifications.channels.items()
    }
    if config.review_webhook_url:
        transports[LEGACY_WEBHOOK] = LegacyWebhook(config.review_webhook_url)
    channels = []
    for name, transport in transports.items():
        recent = Notification.objects.filter(channel=name, last_attempt_at__isnull=False).order_by(
            "-last_attempt_at"
        )[:50]
        failed_attempts, last_error, last_error_at, last_sent_at = 0, "", None, None
        for row in recent.values("status", "attempts", "last_error", "last_attempt_at", "sent_at"):
            if row["status"] == NotificationStatus.SENT:
                last_sent_at = row["sent_at"]
                break
            if row["last_error"]:
                failed_attempts += row["attempts"]
                if not last_error:
                    last_error, last_error_at = row["last_error"], row["last_attempt_at"]
        channels.append(
            {
                "name": name,
                "kind": transport.kind,
                "missing_env": transport.missing_env(),
                "last_sent_at": last_sent_at,
                "failed_attempts": failed_attempts,
                "last_error": last_error,
                "last_error_at": last_error_at,
                "failing": failed_attempts >= settings.HARNESS_NOTIFY_FAILING_AFTER,
            }
        )
    return channels


def user_exists(*, username: str) -> bool:
    return get_user_model().objects.filter(username=username).exists()


# The names of the rules the harness itself writes into `matched_rules` (review.policy,
# review.services): with harness.yaml's rule names, every value the metrics' `rule` label takes.
BUILT_IN_RULES = frozenset(
    {"execute-default", "task-review-override", "langgraph-interrupt", "unknown-outcome"}
)


def review_rule_labels(*, matched_rules: Any) -> list[str]:
    """A review's matched rules as metric labels (harness_base.metrics): harness.yaml's and the
    built-in rules by name, any other (a standing rule a person saved) as `other`, none as
    `none`; each once."""
    known = BUILT_IN_RULES | {rule.name for rule in harness_config().review_rules}
    names = [str(rule.get("name", "")) for rule in matched_rules or () if isinstance(rule, dict)]
    labels = {label_bounded(name, known) for name in names}
    return sorted(labels) or ["none"]


def reviews_pending_by_rule() -> tuple[dict[str, int], datetime | None]:
    """Pending reviews per rule label (review_rule_labels: a review matching two rules counts
    under both; every harness.yaml review rule named) and when the oldest was requested (None:
    none pending). Reads the pending reviews' rules only, from `review_status_requested`
    (status leads): the few a person has not decided yet, whatever the history's size."""
    pending = ReviewRequest.objects.filter(status=ReviewStatus.PENDING)
    # harness.yaml's review rules are there at 0 too: "none pending" is a value, not a gap.
    counts = {r.name: 0 for r in harness_config().review_rules if r.action == "review"}
    for matched in pending.values_list("matched_rules", flat=True).iterator(chunk_size=2000):
        for label in review_rule_labels(matched_rules=matched):
            counts[label] = counts.get(label, 0) + 1
    oldest = pending.order_by("requested_at").values_list("requested_at", flat=True).first()
    return counts, oldest
