"""Recovery reaches reviews only through the core's domain events (tasks.signals, issue #32):
a rollback or a cancel of a task waiting for review cancels its pending review, with a comment
that says why and by whom."""

from __future__ import annotations

import pytest

from checkpoints.models import Checkpoint
from checkpoints.recovery import checkpoint_rollback, task_cancel
from review.models import ReviewRequest
from tests.factories import run_in_process, scripted_task

pytestmark = pytest.mark.django_db(transaction=True)

# A *.conf write is reviewed: the task waits there.
POLICY = """review_rules:
  - {name: conf, risk: write, path_glob: "**/*.conf", action: review}
"""
SCRIPT = [
    {"call": "write_file", "args": {"path": "a.md", "content": "a\n"}},
    {"call": "write_file", "args": {"path": "cfg/app.conf", "content": "x=1\n"}},
    {"final": "done"},
]


@pytest.fixture
def waiting(harness_dirs, harness_yaml, operator):
    harness_yaml(POLICY)
    task = scripted_task(SCRIPT, ["write_file"], user=operator)
    assert run_in_process(task) == "paused"
    assert task.status == "waiting_review"
    return task


def test_a_rollback_cancels_the_pending_review(waiting, operator):
    first = Checkpoint.objects.filter(task=waiting).order_by("seq").first()
    checkpoint_rollback(
        task_id=waiting.id, checkpoint_id=first.id, user=operator, reason="wrong", resume=False
    )
    review = ReviewRequest.objects.get(task=waiting)
    assert review.status == "canceled"
    assert review.comment == "superseded by rollback (operator)"


def test_a_cancel_cancels_the_pending_review(waiting, operator):
    task_cancel(task_id=waiting.id, user=operator, reason="no longer needed")
    review = ReviewRequest.objects.get(task=waiting)
    assert review.status == "canceled" and review.comment == "task canceled by operator"
