"""A resumed run meets the calls its ledger already holds (loaded once per run)."""

from __future__ import annotations

import pytest

from agent.runtime import task_run
from agent.tools.testing import ledger_records
from review.models import ReviewRequest
from review.services import review_decide
from tasks.canonical import canonical_hash
from tasks.models import Task, ToolCall
from tests.factories import queued_task

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _harness_settings(harness_dirs) -> None:
    pass


def test_an_approved_call_runs_once_when_the_task_resumes(operator):
    args = {"key": "pay-1", "value": "42"}
    task = queued_task(
        [{"call": "noop", "args": {}}, {"call": "ledger_append", "args": args}, {"final": "paid"}],
        ["ledger_append", "noop"],
    )
    assert task_run(task_id=task.id) == "paused"  # external calls wait for review
    call = ToolCall.objects.get(task=task, tool="ledger_append")
    assert call.status == "awaiting_review" and ledger_records(key="pay-1") == []

    # Approved through the review service: the worker re-checks the approval before it runs.
    review_decide(
        review_id=ReviewRequest.objects.get(tool_call=call).id,
        user=operator,
        decision="approve",
        arguments_hash=canonical_hash(call.arguments),
    )
    assert task_run(task_id=task.id) == "succeeded"

    assert len(ledger_records(key="pay-1")) == 1
    assert Task.objects.get(id=task.id).result == "paid"
    assert [(c.tool, c.status) for c in ToolCall.objects.filter(task=task).order_by("id")] == [
        ("noop", "succeeded"),
        ("ledger_append", "succeeded"),
    ]
