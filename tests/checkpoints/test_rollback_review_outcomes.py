"""A rollback past a rejected and an edited call takes them out of the task's header (issue #45
item 8): "1 call rejected · 1 call edited" counts only the decisions on calls still on the
task's branch, recounted in the rollback's transaction."""

from __future__ import annotations

import pytest

from checkpoints.models import Checkpoint
from checkpoints.recovery import checkpoint_rollback
from review.models import ReviewRequest
from review.services import review_decide
from tasks.models import Task
from tests.checkpoints.conftest import NO_REVIEW_CONFIG
from tests.conftest import approve
from tests.factories import run_in_process

pytestmark = pytest.mark.django_db(transaction=True)

SCRIPT = [
    {"call": "delete_file", "args": {"path": "a.log"}},
    {"call": "delete_file", "args": {"path": "b.log"}},
    {"final": "done"},
]
# Every delete is reviewed.
POLICY = NO_REVIEW_CONFIG.replace(
    "review_rules: []", "review_rules:\n  - {name: deletes, tool: delete_file, action: review}"
)
FILES = {"a.log": "a\n", "b.log": "b\n", "c.log": "c\n"}


@pytest.fixture
def decided(paused_review, harness_yaml, operator) -> Task:
    """A finished task: its first call rejected, its second approved with edited arguments."""
    harness_yaml(POLICY)
    first = paused_review(SCRIPT, files=FILES)
    review_decide(review_id=first.id, user=operator, decision="reject", reason="keep a")
    task = Task.objects.get(pk=first.task_id)
    assert run_in_process(task) == "paused"
    second = ReviewRequest.objects.get(task=task, status="pending")
    approve(second, operator, arguments={"path": "c.log"})
    assert run_in_process(task) == "succeeded"
    task = Task.objects.get(pk=task.pk)
    assert task.review_notes == ["1 call rejected", "1 call edited"]
    return task


def rollback(task: Task, checkpoint: Checkpoint, operator) -> Task:
    checkpoint_rollback(
        task_id=task.id, checkpoint_id=checkpoint.id, user=operator, reason="redo", resume=False
    )
    return Task.objects.get(pk=task.pk)


def test_a_rollback_before_the_decisions_drops_them_from_the_header(decided, operator, as_user):
    first = Checkpoint.objects.filter(task=decided).order_by("seq").first()
    task = rollback(decided, first, operator)
    assert (task.calls_rejected, task.calls_edited) == (0, 0)
    page = as_user(operator).get(f"/tasks/{task.id}/").content.decode()
    assert "call rejected" not in page and "call edited" not in page
    assert "calls rejected" not in page and "calls edited" not in page


def test_a_rollback_after_the_decisions_keeps_them(decided, operator, as_user):
    last = Checkpoint.objects.filter(task=decided).order_by("seq").last()
    task = rollback(decided, last, operator)
    assert (task.calls_rejected, task.calls_edited) == (1, 1)
    page = as_user(operator).get(f"/tasks/{task.id}/").content.decode()
    assert " · 1 call rejected · 1 call edited</span>" in page
