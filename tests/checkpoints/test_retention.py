"""Retention: old tool-level checkpoints go, what rollback needs stays, and blobs nothing
references any more are collected."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from checkpoints.models import Blob, Checkpoint
from checkpoints.retention import BLOB_GRACE_S, checkpoints_apply_retention
from checkpoints.services import checkpoint_decode
from checkpoints.snapshots import snapshot_blob_keys, snapshot_restore
from harness_site import config
from tests.checkpoints.conftest import NO_REVIEW_CONFIG, spec_dict

pytestmark = pytest.mark.django_db(transaction=True)


def test_retention_keeps_recent_step_and_head_checkpoints_and_collects_orphan_blobs(
    settings, tmp_path, make_task, run_inline
):
    path = tmp_path / "retention.yaml"
    path.write_text(
        NO_REVIEW_CONFIG + "retention: {keep_last_per_task: 3, keep_levels: [task, step]}\n"
    )
    settings.HARNESS_CONFIG_FILE = path
    config.harness_config.cache_clear()
    task = make_task(
        spec_dict(
            *[
                {"call": "write_file", "args": {"path": f"f{i}.txt", "content": f"v{i}"}}
                for i in range(4)
            ],
            {"final": "done"},
            tools=["write_file"],
        )
    )
    assert run_inline(task) == "succeeded"
    before = list(Checkpoint.objects.filter(task=task).order_by("seq"))
    tool_level = [c for c in before if c.level == "tool"]
    assert len(tool_level) == 4
    orphan = Blob.objects.create(sha256="0" * 64, size=1, data=b"x")
    Blob.objects.update(created_at=timezone.now() - timedelta(seconds=BLOB_GRACE_S + 60))

    result = checkpoints_apply_retention()

    after = list(Checkpoint.objects.filter(task=task).order_by("seq"))
    assert result.checkpoints_deleted == len(before) - len(after) > 0
    assert all(c.level != "tool" for c in after[:-3])
    assert {c.id for c in before if c.level in ("task", "step")} <= {c.id for c in after}
    task.refresh_from_db()
    assert task.head_checkpoint_id in {c.id for c in after}
    assert not Blob.objects.filter(sha256=orphan.sha256).exists()
    assert result.blobs_deleted >= 1
    # Every remaining checkpoint still restores.
    for checkpoint in after:
        snapshot = checkpoint_decode(checkpoint).snapshot
        assert snapshot_blob_keys(snapshot) <= set(Blob.objects.values_list("sha256", flat=True))
    snapshot_restore(workspace=tmp_path / "check", snapshot=checkpoint_decode(after[0]).snapshot)
