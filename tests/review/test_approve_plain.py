"""A plain approval (review.services.approve_plain: the call approved as proposed by its one
approver) is written in a handful of statements, and writes exactly what the general path
(review_decide's _approve and review_settle) writes: the same rows, events, audit entry,
receipt on an intact chain, and the task requeued with its job."""

from __future__ import annotations

from typing import Any

import django_rq
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rq.job import Job

from review.models import DecisionReceipt, ReviewApproval, ReviewRequest
from review.services import decide
from tasks.models import AuditEntry, Task, TaskEvent, ToolCall
from tests.conftest import approve
from tests.review.test_receipts import verify

pytestmark = pytest.mark.django_db(transaction=True)

# What differs between two reviews of two tasks whatever path decided them.
VARYING = {"review_id", "call_id", "wait_s"}


def written(review: ReviewRequest, since: int) -> dict[str, Any]:
    """Everything the decision of `review` wrote (events after id `since`), without ids and
    times."""
    review = ReviewRequest.objects.get(pk=review.pk)
    call = ToolCall.objects.get(pk=review.tool_call_id)
    task = Task.objects.get(pk=review.task_id)
    receipt = DecisionReceipt.objects.get(review_id=review.id)
    audit = AuditEntry.objects.get(target=f"review {review.id}")
    return {
        "review": (review.status, review.decided_by_id, review.comment, review.decision_reason),
        "decided": review.decided_at is not None,
        "call": (call.status, call.arguments, call.arguments_hash, call.finished_at),
        "task": (task.status, task.finished_at, task.review_wait_s > 0, bool(task.rq_job_id)),
        "events": [
            (
                e.type,
                e.actor,
                e.step_index,
                {k: v for k, v in e.payload.items() if k not in VARYING},
            )
            for e in TaskEvent.objects.filter(task_id=task.id, id__gt=since).order_by("id")
        ],
        "approvals": list(
            ReviewApproval.objects.filter(review=review).values_list(
                "user_id", "arguments_hash", "comment"
            )
        ),
        "audit": (audit.action, audit.actor_id, audit.reason, audit.before, audit.after),
        "receipt": (
            receipt.decision,
            receipt.via,
            receipt.actor,
            receipt.actor_user_id,
            {k: v for k, v in receipt.subject.items() if k != "call_id"},
        ),
    }


def last_event_id() -> int:
    return TaskEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0


def test_a_plain_approval_writes_what_the_general_path_writes(paused_review, operator, monkeypatch):
    plain, general = paused_review(), paused_review()
    since = last_event_id()
    approve(plain, operator, comment="fine", reason="checked")
    monkeypatch.setattr(decide, "review_approve_plain", lambda **kwargs: None)
    approve(general, operator, comment="fine", reason="checked")

    assert written(plain, since) == written(general, since)
    events = written(plain, since)["events"]
    assert [e[0] for e in events] == ["review_decided", "status"]
    assert events[1][3] == {
        "from": "waiting_review",
        "to": "queued",
        "reason": "review approved: delete_file",
    }
    assert verify()[0] == 0


def test_a_plain_approval_is_a_handful_of_statements(paused_review, operator):
    first, review = paused_review(), paused_review()
    approve(first, operator)  # the roll-up lock's and the chain head's rows exist from now on
    with CaptureQueriesContext(connection) as queries:
        approve(review, operator)
    # approve's own read of the shown hash, then BEGIN, the task locked, the review locked with
    # its call and what the decision reads, the roll-up lock and the chain head, the write, and
    # COMMIT. The job's id is written with the decision: nothing after the enqueue.
    sqls = [q["sql"] for q in queries.captured_queries]
    assert len(sqls) == 7, "\n".join(sql[:150] for sql in sqls)
    assert sqls[1] == "BEGIN" and sqls[-1] == "COMMIT"
    task = Task.objects.get(pk=review.task_id)
    assert task.status == "queued"
    # Enqueued on the resume lane under the id the decision recorded.
    job = Job.fetch(task.rq_job_id, connection=django_rq.get_connection("resume"))
    assert job.origin == "resume" and list(job.args) == [str(task.id)]


def test_a_second_decision_on_a_plainly_approved_review_conflicts(
    paused_review, operator, second_operator
):
    review = paused_review()
    approve(review, operator)
    with pytest.raises(decide.ReviewConflict, match="already approved"):
        approve(review, second_operator)
    assert ReviewApproval.objects.filter(review=review).count() == 1
