"""The state machines' derived fields and fences, through recovery (issue 13): a rolled-back
task leaves its failure group; stale workers' writes are refused."""

from __future__ import annotations

import pytest
from django.utils import timezone

from checkpoints.models import Checkpoint
from checkpoints.recovery import checkpoint_rollback
from checkpoints.services import checkpoint_load_latest_valid
from dashboard.stats import failure_groups
from dashboard.windows import window_parse
from tasks.models import Task
from tasks.selectors import tasks_list
from tasks.services import task_job_record
from tasks.states import LeaseLost
from tests.checkpoints.conftest import spec_dict

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def failed(make_task, run_inline, operator):
    """A task that wrote a file and then failed (its script ran out)."""
    task = make_task(
        spec_dict(
            {"call": "write_file", "args": {"path": "a.txt", "content": "1"}},
            tools=["write_file"],
        ),
        user=operator,
    )
    assert run_inline(task) == "failed"
    return task


def _groups() -> dict[str, int]:
    window = window_parse(since="24h", bucket=None, now=timezone.now())
    return {g["fingerprint"]: g["tasks"] for g in failure_groups(window)}


def test_a_rolled_back_failed_task_leaves_its_failure_group(failed, operator):
    fingerprint = failed.error_fingerprint
    assert fingerprint and _groups().get(fingerprint) == 1
    assert failed in tasks_list(fingerprint=fingerprint)
    first = Checkpoint.objects.filter(task=failed, trigger="after_step").order_by("seq").first()

    checkpoint_rollback(
        task_id=failed.id, checkpoint_id=first.id, user=operator, reason="try again", resume=False
    )

    failed.refresh_from_db()
    assert failed.status == "held"
    assert (failed.error_class, failed.error_message, failed.error_fingerprint) == ("", "", "")
    assert fingerprint not in _groups()
    assert failed not in tasks_list(fingerprint=fingerprint)


def test_rolling_back_a_held_task_again_keeps_it_held_with_no_status_event(failed, operator):
    first = Checkpoint.objects.filter(task=failed, trigger="after_step").order_by("seq").first()
    checkpoint_rollback(
        task_id=failed.id, checkpoint_id=first.id, user=operator, reason="one", resume=False
    )
    statuses = failed.events.filter(type="status").count()
    checkpoint_rollback(
        task_id=failed.id, checkpoint_id=first.id, user=operator, reason="two", resume=False
    )
    failed.refresh_from_db()
    assert failed.status == "held" and failed.rollback_count == 2
    assert failed.events.filter(type="status").count() == statuses


def test_recording_the_job_id_is_refused_for_a_stale_lease_epoch(failed):
    epoch = Task.objects.get(id=failed.id).lease_epoch
    assert task_job_record(task_id=failed.id, epoch=epoch, job_id="job-now")
    assert not task_job_record(task_id=failed.id, epoch=epoch - 1, job_id="job-stale")
    assert Task.objects.get(id=failed.id).rq_job_id == "job-now"


def test_a_stale_worker_records_no_checkpoint_corrupted_event(failed):
    """Corrupted checkpoints found by a worker whose lease is gone: LeaseLost, no event."""
    head = Checkpoint.objects.get(id=failed.head_checkpoint_id)
    Checkpoint.objects.filter(pk=head.pk).update(checksum="0" * 64)
    Task.objects.filter(id=failed.id).update(status="running")
    stale = failed.lease_epoch - 1

    with pytest.raises(LeaseLost):
        checkpoint_load_latest_valid(task_id=failed.id, head_id=head.id, epoch=stale)
    assert not failed.events.filter(type="checkpoint_corrupted").exists()

    loaded = checkpoint_load_latest_valid(
        task_id=failed.id, head_id=head.id, epoch=failed.lease_epoch
    )
    assert loaded is not None and loaded.checkpoint.id != head.id
    assert failed.events.filter(type="checkpoint_corrupted").count() == 1
