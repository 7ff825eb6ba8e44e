"""A run's snapshots list a few changed files against the manifest last stored in full (the
`delta` of checkpoints.snapshots.capture) instead of storing a new manifest each step: they read
back exactly as the workspace was, a full manifest is stored again past DELTA_MAX changes or
once the stored blobs are no longer trusted, and garbage collection keeps the file bodies only
a delta lists."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
import time_machine
from django.utils import timezone

from checkpoints.models import Blob, Checkpoint
from checkpoints.retention import (
    BLOB_GRACE_S,
    blobs_collect_garbage,
    blobs_count,
    checkpoints_apply_retention,
)
from checkpoints.services import checkpoint_decode
from checkpoints.snapshots import (
    DELTA_MAX,
    snapshot_blob_keys,
    snapshot_capture,
    snapshot_distrust,
    snapshot_manifest,
    snapshot_restore,
    workspace_manifest,
)
from harness_base import config
from tests.checkpoints.conftest import NO_REVIEW_CONFIG, files_of, spec_dict

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def workspace(tmp_path) -> Path:
    root = tmp_path / "ws"
    (root / "docs").mkdir(parents=True)
    for i in range(10):
        (root / "docs" / f"{i}.txt").write_text(f"doc {i}")
    (root / "keep.txt").write_text("kept")
    return root


def _same(snapshot: dict, workspace: Path) -> None:
    manifest, now = snapshot_manifest(snapshot), workspace_manifest(workspace)
    assert dict(manifest) == dict(now)
    assert manifest.folders == now.folders


def test_a_few_changes_are_listed_against_the_stored_manifest_and_read_back_exactly(workspace):
    first = snapshot_capture(workspace=workspace, delta=True)
    assert "delta" not in first
    (workspace / "docs" / "3.txt").write_text("changed")
    (workspace / "new.txt").write_text("new")
    (workspace / "keep.txt").unlink()
    (workspace / "empty").mkdir()

    second = snapshot_capture(workspace=workspace, delta=True)

    assert second["root"] == first["root"] and second["v"] == 2
    assert [entry[0] for entry in second["delta"]] == [
        "docs/3.txt",
        "empty/",
        "keep.txt",
        "new.txt",
    ]
    assert second["files"] == 11
    _same(second, workspace)
    # Unchanged since: the stored manifest's own reference.
    (workspace / "docs" / "3.txt").write_text("doc 3")
    (workspace / "new.txt").unlink()
    (workspace / "keep.txt").write_text("kept")
    (workspace / "empty").rmdir()
    assert snapshot_capture(workspace=workspace, delta=True) == first


def test_more_changes_than_the_bound_store_a_full_manifest_again(workspace):
    first = snapshot_capture(workspace=workspace, delta=True)
    for i in range(DELTA_MAX + 1):
        (workspace / "docs" / f"{i}.txt").write_text(f"v2 {i}")

    full = snapshot_capture(workspace=workspace, delta=True)
    _same(full, workspace)
    (workspace / "docs" / "9.txt").write_text("v2 9")
    after = snapshot_capture(workspace=workspace, delta=True)

    assert "delta" not in full and full["root"] != first["root"]
    # The next delta is against the new full manifest.
    assert after["root"] == full["root"] and [e[0] for e in after["delta"]] == ["docs/9.txt"]
    _same(after, workspace)


def test_a_distrusted_workspace_stores_a_full_manifest(workspace):
    first = snapshot_capture(workspace=workspace, delta=True)
    (workspace / "docs" / "1.txt").write_text("changed")
    snapshot_distrust(workspace)

    again = snapshot_capture(workspace=workspace, delta=True)

    assert "delta" not in again and again["root"] != first["root"]
    _same(again, workspace)


def test_a_delta_snapshot_restores_its_files(workspace, tmp_path):
    snapshot_capture(workspace=workspace, delta=True)
    (workspace / "docs" / "2.txt").write_text("two")
    (workspace / "docs" / "5.txt").unlink()
    snapshot = snapshot_capture(workspace=workspace, delta=True)
    assert "delta" in snapshot

    snapshot_restore(workspace=tmp_path / "copy", snapshot=snapshot)

    assert files_of(tmp_path / "copy") == files_of(workspace)


@pytest.fixture
def keep_one(settings, tmp_path):
    """Keep only the newest checkpoint of each level but `task`."""
    path = tmp_path / "retention.yaml"
    path.write_text(NO_REVIEW_CONFIG + "retention: {keep_last_per_task: 1, keep_levels: [task]}\n")
    settings.HARNESS_CONFIG_FILE = path
    config.harness_config.cache_clear()


def test_garbage_collection_keeps_the_file_bodies_a_delta_alone_lists(
    keep_one, make_task, run_inline, operator, tmp_path
):
    calls = [
        {"call": "write_file", "args": {"path": f"f{i}.txt", "content": f"delta {i}"}}
        for i in range(3)
    ]
    task = make_task(spec_dict(*calls, {"final": "done"}, tools=["write_file"]), user=operator)
    assert run_inline(task) == "succeeded"
    snapshots = [checkpoint_decode(c).snapshot for c in Checkpoint.objects.filter(task=task)]
    # The files were written after the first (full) manifest: only deltas list them.
    assert any(s and s.get("delta") for s in snapshots)

    assert blobs_count()
    assert checkpoints_apply_retention().checkpoints_deleted > 0
    with time_machine.travel(timezone.now() + timedelta(seconds=BLOB_GRACE_S + 60)):
        blobs_collect_garbage()

    stored = set(Blob.objects.values_list("sha256", flat=True))
    head = Checkpoint.objects.get(id=task.head_checkpoint_id)
    snapshot = checkpoint_decode(head).snapshot
    assert snapshot_blob_keys(snapshot) <= stored
    snapshot_restore(workspace=tmp_path / "restored", snapshot=snapshot)
    assert files_of(tmp_path / "restored") == {f"f{i}.txt": f"delta {i}".encode() for i in range(3)}
