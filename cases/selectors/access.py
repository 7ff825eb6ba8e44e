"""Who may read a case or a replay, and the lists of cases and of a case's replays."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db.models import QuerySet

from cases.models import Case, CaseRun
from tasks.errors import NotFound
from tasks.selectors import user_can_view


def access_case(user: User, case_id: Any) -> Case:
    """A case `user` may read (any role may; no role reads nothing). NotFound otherwise."""
    if not user_can_view(user):
        raise NotFound("case not found")
    try:
        return Case.objects.get(id=case_id)
    except (Case.DoesNotExist, ValueError, TypeError):
        raise NotFound("case not found") from None
    except Exception as exc:  # a malformed UUID raises ValidationError from the field
        if exc.__class__.__name__ == "ValidationError":
            raise NotFound("case not found") from None
        raise


def access_case_run(user: User, run_id: Any) -> CaseRun:
    if not user_can_view(user):
        raise NotFound("replay not found")
    try:
        return CaseRun.objects.select_related("case", "task").get(id=run_id)
    except (CaseRun.DoesNotExist, ValueError, TypeError):
        raise NotFound("replay not found") from None
    except Exception as exc:
        if exc.__class__.__name__ == "ValidationError":
            raise NotFound("replay not found") from None
        raise


def cases_list(*, tag: str | None = None) -> list[Case]:
    cases = list(Case.objects.all())
    if tag:
        # Tags are a short JSON list per case: filtered here, portable across databases.
        cases = [c for c in cases if tag in (c.tags or [])]
    return cases


def case_runs(*, case: Case, limit: int = 50) -> QuerySet[CaseRun]:
    return CaseRun.objects.filter(case=case).select_related("task")[:limit]
