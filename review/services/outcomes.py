"""What people decided on a task's calls, counted again after a rollback (issue #45): a call
rejected by a person, or approved with edited arguments, counts on the task
(`calls_rejected`, `calls_edited`) only while it is still on the task's branch. The same rule
as each decision's count (review.services.settle) and the backfill (tasks migration 0019)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Count, Q

from review.models import ReviewRequest, ReviewStatus
from tasks.services import task_review_outcomes_set

# Reviews a person decides: a policy pause or a LangGraph interrupt (not a standing rule's
# allowance, an expiry or an unknown outcome's resolution).
PERSON_KINDS = ("policy", "langgraph")
REJECTED = Q(status=ReviewStatus.REJECTED, decided_by__isnull=False)
EDITED = Q(status=ReviewStatus.APPROVED, edited_arguments__isnull=False)


def review_outcomes_recount(*, task_id: Any, live_call_ids: Iterable[str]) -> tuple[int, int]:
    """Recount the task's rejected and edited calls over the reviews of `live_call_ids` and
    write them on the task (inside the rollback's transaction, the task row locked);
    -> (rejected, edited)."""
    counts = ReviewRequest.objects.filter(
        task_id=task_id, kind__in=PERSON_KINDS, tool_call__call_id__in=list(live_call_ids)
    ).aggregate(rejected=Count("id", filter=REJECTED), edited=Count("id", filter=EDITED))
    rejected, edited = counts["rejected"], counts["edited"]
    task_review_outcomes_set(task_id=task_id, rejected=rejected, edited=edited)
    return rejected, edited
