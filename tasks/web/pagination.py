"""Pagination for lists over large tables."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.db import connections, transaction
from django.db.models import QuerySet
from django.utils.functional import cached_property
from ninja import Field, Schema
from ninja.pagination import PageNumberPagination

MAX_API_PAGE = 10_000


class CappedPaginator(Paginator):
    """Counts at most `cap` matches (COUNT over a LIMIT subquery), so a broad filter on a
    large table pages without counting every match; `capped` says the count stopped there.
    Pages past the cap are reached by narrowing the filters."""

    cap = 1000

    @cached_property
    def count(self) -> int:
        counted = self.object_list[: self.cap + 1]
        if not isinstance(counted, QuerySet) or connections[counted.db].vendor != "postgresql":
            return counted.count() if isinstance(counted, QuerySet) else len(counted)
        # At most cap + 1 rows: starting parallel workers costs more than it saves (a filtered
        # task list at 100k tasks: 47 ms with two workers, 18 ms without).
        with transaction.atomic(using=counted.db), connections[counted.db].cursor() as cursor:
            cursor.execute("SET LOCAL max_parallel_workers_per_gather = 0")
            return counted.count()

    @property
    def capped(self) -> bool:
        return self.count > self.cap


class ApiPagination(PageNumberPagination):
    """ninja's page-number pagination with the page number bounded: an offset past what
    PostgreSQL's bigint holds was a 500."""

    class Input(Schema):
        page: int = Field(1, ge=1, le=MAX_API_PAGE)
        page_size: int | None = Field(None, ge=1, le=500)
