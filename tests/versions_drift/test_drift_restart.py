"""`restart` on a `version_drift` review (issue #43): the task is rolled back to the chosen
checkpoint and resumed, the review records the choice, and the receipt says restart. The
paused task is real (its loop ran in-process); the review is turned into a version_drift one
as the worker's drift check would open it."""

from __future__ import annotations

import pytest

from checkpoints.models import Checkpoint
from review.models import DecisionReceipt, ReviewRequest
from review.services import review_decide
from tasks.models import Task, TaskEvent

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _settings(harness_dirs, quiet_watchdog) -> None:
    pass


def test_restart_rolls_back_to_the_chosen_checkpoint_and_records_the_choice(
    paused_review, operator
):
    review = paused_review(user=operator)
    ReviewRequest.objects.filter(pk=review.pk).update(
        kind="version_drift", drift={"touches": ["the pending call's tool changed"]}
    )
    first = Checkpoint.objects.filter(task_id=review.task_id).order_by("seq").first()

    review_decide(
        review_id=review.id,
        user=operator,
        decision="restart",
        checkpoint_id=first.id,
        comment="start over under the new code",
    )

    review.refresh_from_db()
    assert review.status == "rejected"
    assert review.choice == {"decision": "restart", "checkpoint_id": str(first.id)}
    task = Task.objects.get(pk=review.task_id)
    assert task.status == "queued"
    head = Checkpoint.objects.get(pk=task.head_checkpoint_id)
    assert head.trigger == "rollback" and head.parent_id == first.id
    assert TaskEvent.objects.filter(task=task, type="rollback").exists()
    assert DecisionReceipt.objects.get(review_id=review.id).decision == "restart"
