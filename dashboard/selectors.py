"""Read-side queries for the overview, the audit log, the navigation's search and each user's
preferences."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import date, timedelta
from functools import cache
from typing import Any
from zoneinfo import available_timezones

from django.contrib.auth.models import User
from django.db.models import Count, Min, QuerySet

from dashboard.models import UserPreference
from review.models import ReviewRequest, ReviewStatus
from tasks.models import AuditEntry, Task
from tasks.selectors import day_start
from tasks.states import ACTIVE, TaskStatus


def status_counts() -> dict[str, Any]:
    """{"counts": {status: n} for every status, "active": n, "oldest_review_at": datetime}.

    One GROUP BY over task_status_created plus one MIN over review_status_requested."""
    counts = dict(Task.objects.values_list("status").annotate(n=Count("*")).order_by())
    oldest = ReviewRequest.objects.filter(
        status=ReviewStatus.PENDING, task__status=TaskStatus.WAITING_REVIEW
    ).aggregate(at=Min("requested_at"))["at"]
    return {
        "counts": {status: counts.get(status, 0) for status in TaskStatus.values},
        "active": sum(counts.get(status, 0) for status in ACTIVE),
        "oldest_review_at": oldest,
    }


# The actions services audit, offered as suggestions in the audit page's filter.
AUDIT_ACTIONS = (
    "decide",
    "edit",
    "cancel",
    "retry",
    "rollback",
    "resume",
    "requeue",
    "sso_login",
    "person_invite",
    "person_invite_accept",
    "person_role",
    "person_deactivate",
)


def audit_entries(
    *,
    actor: str | None = None,
    action: str | None = None,
    task_id: Any = None,
    date_from: date | None = None,
    date_to: date | None = None,
) -> QuerySet[AuditEntry]:
    """Audit entries newest first, narrowed by the audit page's filters (served by `at`,
    audit_action_at and the task foreign-key index)."""
    qs = AuditEntry.objects.order_by("-at", "-id")
    if actor:
        qs = qs.filter(actor_name=actor)
    if action:
        qs = qs.filter(action=action)
    if task_id:
        qs = qs.filter(task_id=task_id)
    if date_from:
        qs = qs.filter(at__gte=day_start(date_from))
    if date_to:
        qs = qs.filter(at__lt=day_start(date_to) + timedelta(days=1))
    return qs


# --- the navigation's search ------------------------------------------------------------------

SEARCH_MAX_LENGTH = 200
SEARCH_LIMIT = 20
# A task id prefix is searched from this many hex digits on (fewer match too much to help).
SEARCH_ID_MIN = 4
# A title is searched for from this many characters on (the trigram index needs three; two
# still stop early on the newest tasks, one would not).
SEARCH_TITLE_MIN = 2
_REVIEW_ID = re.compile(r"#?([0-9]{1,18})")
_HEX = re.compile(rf"[0-9a-f]{{{SEARCH_ID_MIN},32}}")


@dataclass(frozen=True)
class SearchResults:
    tasks: list[Task]
    reviews: list[ReviewRequest]

    @property
    def count(self) -> int:
        return len(self.tasks) + len(self.reviews)


def _task_id_range(text: str) -> tuple[uuid.UUID, uuid.UUID] | None:
    """The ids a task id prefix stands for, as a primary-key range (dashes optional)."""
    digits = text.lower().replace("-", "")
    if not _HEX.fullmatch(digits):
        return None
    return uuid.UUID(digits.ljust(32, "0")), uuid.UUID(digits.ljust(32, "f"))


def search(*, q: str, limit: int = SEARCH_LIMIT) -> SearchResults:
    """What the navigation's search finds for `q`: the tasks whose id starts with it (a whole
    UUID or at least SEARCH_ID_MIN hex digits), then those whose title contains it, newest
    first; and the review whose id it is ("42" or "#42"). At most `limit` tasks.

    Every role that reads reads every task and review, so there is nothing to filter by user
    here; the view lets only those roles in. Index use: the id prefix is a range of the task
    primary key, the title the trigram index on UPPER(title) (PostgreSQL), the review its
    primary key."""
    q = q.strip()
    tasks: list[Task] = []
    id_range = _task_id_range(q)
    if id_range is not None:
        tasks = list(
            Task.objects.filter(id__gte=id_range[0], id__lte=id_range[1]).order_by("id")[:limit]
        )
    if len(q) >= SEARCH_TITLE_MIN and len(tasks) < limit:
        seen = [t.id for t in tasks]
        tasks += list(
            Task.objects.filter(title__icontains=q)
            .exclude(id__in=seen)
            .order_by("-created_at")[: limit - len(tasks)]
        )
    reviews: list[ReviewRequest] = []
    match = _REVIEW_ID.fullmatch(q)
    if match:
        reviews = list(ReviewRequest.objects.select_related("task").filter(id=int(match[1])))
    return SearchResults(tasks=tasks, reviews=reviews)


# --- preferences ------------------------------------------------------------------------------


@cache
def time_zones() -> frozenset[str]:
    """The IANA zones a user may choose (the system's tz database, or the tzdata package)."""
    return frozenset(available_timezones())


# Where user_time_zone keeps its answer on the user object (services.preference_time_zone_set
# updates it).
USER_TIME_ZONE_ATTR = "_harness_time_zone"


def user_time_zone(*, user: User) -> str:
    """The zone `user` chose for the pages, or "" (the browser's zone). One primary-key read
    per user object (a request's layout and its charts share it)."""
    if not user.is_authenticated:
        return ""
    zone: str | None = getattr(user, USER_TIME_ZONE_ATTR, None)
    if zone is None:
        stored = UserPreference.objects.filter(user=user).values_list("time_zone", flat=True)
        zone = stored.first() or ""
        setattr(user, USER_TIME_ZONE_ATTR, zone)
    return zone
