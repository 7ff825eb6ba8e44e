"""A run's `versions` are stored once, as a VersionBody, and its checkpoints name it
(checkpoints.versions_ref): the column holds the reference and the harness version (which the
rolling deploy's handback reads in SQL), every reader gets the whole dict back."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.utils import timezone

from checkpoints import versions_ref
from checkpoints.models import Checkpoint, VersionBody
from checkpoints.versions import checkpoint_versions
from checkpoints.versions_ref import StoredVersions, versions_resolved
from harness_base.versions import harness_version
from tasks.models import Task
from tests.factories import scripted_task

pytestmark = pytest.mark.django_db(transaction=True)


def _columns(task_id) -> list[dict]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT versions::text FROM checkpoints_checkpoint WHERE task_id = %s ORDER BY seq",
            [str(task_id)],
        )
        return [json.loads(row[0]) for row in cursor.fetchall()]


def test_a_runs_checkpoints_name_its_versions_stored_once_and_read_back_whole(paused_review):
    review = paused_review()
    task = review.task
    stored = _columns(task.id)
    assert len(stored) >= 2
    ref = stored[0]["ref"]
    # Each row: the reference and the harness version inline, nothing else.
    assert all(c == {"harness": {"version": "0.1.0"}, "ref": ref} for c in stored)
    body = VersionBody.objects.get(sha256=ref).body
    assert body["harness"] == harness_version() and "tools" in body and "policy" in body
    # Read back whole: the model, the head's versions, the review's (stored whole).
    for checkpoint in Checkpoint.objects.filter(task=task):
        assert checkpoint.versions == body
    assert checkpoint_versions(task_id=task.id) == body
    assert review.versions == body
    # The handback's SQL check reads the inline version.
    version = (
        Task.objects.filter(id=task.id)
        .values_list("head_checkpoint__versions__harness__version", flat=True)
        .get()
    )
    assert version == "0.1.0"


def test_a_plain_dict_is_stored_whole_and_a_missing_body_reads_as_stored():
    task = scripted_task([{"final": "done"}], [])
    whole = {"harness": {"version": "0.1.0", "commit": "abc"}, "spec": "s", "tools": {}}
    named = StoredVersions({**whole, "spec": "t"})
    rows = [
        Checkpoint(
            task_id=task.id,
            seq=seq,
            level="step",
            trigger="manual",
            payload=b"x",
            checksum="0" * 64,
            created_at=timezone.now(),
            versions=versions,
        )
        for seq, versions in ((1, whole), (2, named))
    ]
    Checkpoint.objects.bulk_create(rows)
    assert _columns(task.id) == [whole, {"harness": {"version": "0.1.0"}, "ref": named.ref}]
    # Its body never written (nor known to this process): read back as stored, not an error.
    versions_ref._bodies.clear()
    missing = Checkpoint.objects.get(task=task, seq=2).versions
    assert missing == {"harness": {"version": "0.1.0"}, "ref": named.ref}
    VersionBody.objects.create(sha256=named.ref, body=dict(named))
    assert Checkpoint.objects.get(task=task, seq=2).versions == dict(named)
    assert Checkpoint.objects.get(task=task, seq=1).versions == whole
    # What a reader gets is its own copy.
    copy = versions_resolved({"ref": named.ref})
    copy["spec"] = "changed"
    assert versions_resolved({"ref": named.ref})["spec"] == "t"
