"""The reads under lock of a plain approval (review.services.approve_plain), one statement
each, in the lock order every decision follows: the task, the review, then the review roll-up
lock and the receipt chain head."""

from __future__ import annotations

import functools
from typing import Any

from django.db import connection

from review.models import (
    Notification,
    NotificationStatus,
    ReceiptChainHead,
    ReviewApproval,
    ReviewRequest,
    ReviewStatus,
)
from review.notifications import WHILE_PENDING
from review.receipts import CHAIN_HEAD_ID, receipt_chain_lock
from review.rollups import REVIEW_ROLL_LOCK
from tasks.events import EventType
from tasks.models import SweepRun, Task, TaskEvent, ToolCall
from tasks.rollups import roll_lock


def plain_task_locked(*, review_id: Any) -> Task | None:
    """Statement 1: the review's task, locked (task_lock's lock, by the review's id)."""
    try:
        pk = int(review_id)
    except (TypeError, ValueError):
        return None
    rows = list(Task.objects.raw(_task_sql(), [pk]))
    return rows[0] if rows else None


def plain_review_locked(*, review_id: Any) -> ReviewRequest | None:
    """Statement 2: the review, locked, with its tool call (`review.tool_call`, not locked:
    the task's lock covers it) and what the decision reads besides (`plain_*`)."""
    rows = list(
        ReviewRequest.objects.raw(
            _review_sql(),
            [
                ReviewStatus.PENDING.value,
                NotificationStatus.PENDING.value,
                [event.value for event in WHILE_PENDING],
                EventType.STATUS.value,
                int(review_id),
            ],
        )
    )
    if not rows:
        return None
    review = rows[0]
    if review.tool_call_id is not None:
        values = [getattr(review, f"plain_c_{f.attname}") for f in _CALL_FIELDS]
        review.tool_call = ToolCall.from_db(
            review._state.db,
            [f.attname for f in _CALL_FIELDS],
            [_from_db(f, value) for f, value in zip(_CALL_FIELDS, values, strict=True)],
        )
    return review


# The tool call's columns statement 2 reads (as `plain_c_<attname>`).
_CALL_FIELDS = ToolCall._meta.concrete_fields


def _from_db(field: Any, value: Any) -> Any:
    """A column of a raw row as the model has it (as Django converts it for a query): JSON
    parsed, for one."""
    if value is None or not hasattr(field, "from_db_value"):
        return value
    return field.from_db_value(value, None, connection)


def plain_global_locks() -> tuple[int, str]:
    """Statement 3: the review roll-up lock, then the receipt chain head (the order in which
    review_transition and receipt_record take them) -> the head's (seq, hash). Either row is
    made on first use, by the functions that take them one at a time."""
    with connection.cursor() as cursor:
        cursor.execute(_locks_sql(), [REVIEW_ROLL_LOCK, CHAIN_HEAD_ID])
        row = cursor.fetchone()
    if row is not None:
        return int(row[0]), str(row[1])
    roll_lock(name=REVIEW_ROLL_LOCK, wait=True)
    head = receipt_chain_lock()
    return head.seq, head.hash


def _table(model: Any) -> str:
    return str(connection.ops.quote_name(model._meta.db_table))


@functools.cache
def _task_sql() -> str:  # built once: the database is known by then
    return (
        f"SELECT * FROM {_table(Task)} WHERE id = "
        f"(SELECT task_id FROM {_table(ReviewRequest)} WHERE id = %s) FOR UPDATE"
    )


@functools.cache
def _review_sql() -> str:
    approvals, notes = _table(ReviewApproval), _table(Notification)
    reviews, calls, events = _table(ReviewRequest), _table(ToolCall), _table(TaskEvent)
    qn = connection.ops.quote_name
    call = ", ".join(f"c.{qn(f.column)} AS {qn('plain_c_' + f.attname)}" for f in _CALL_FIELDS)
    return (
        f"SELECT r.*, {call}, "
        f"EXISTS (SELECT 1 FROM {approvals} a WHERE a.review_id = r.id) AS plain_approved_before, "
        f"EXISTS (SELECT 1 FROM {reviews} o WHERE o.task_id = r.task_id AND o.status = %s"
        f" AND o.id <> r.id) AS plain_others_pending, "
        f"EXISTS (SELECT 1 FROM {notes} n WHERE n.review_id = r.id AND n.status = %s"
        f" AND n.event = ANY(%s)) AS plain_notices_pending, "
        f"(SELECT e.created_at FROM {events} e WHERE e.task_id = r.task_id AND e.type = %s"
        f" ORDER BY e.id DESC LIMIT 1) AS plain_entered "
        f"FROM {reviews} r LEFT JOIN {calls} c ON c.id = r.tool_call_id "
        f"WHERE r.id = %s FOR UPDATE OF r"
    )


@functools.cache
def _locks_sql() -> str:
    # One statement locks its FROM list's rows in the list's order.
    return (
        f"SELECT h.seq, h.hash FROM {_table(SweepRun)} s CROSS JOIN {_table(ReceiptChainHead)} h "
        f"WHERE s.name = %s AND h.id = %s FOR UPDATE"
    )
