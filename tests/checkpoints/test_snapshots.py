"""Workspace snapshots: capture, materialise, restore, and what they cost in storage."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from django.db.models import Sum
from django.db.models.functions import Length

from checkpoints.models import Blob
from checkpoints.services import checkpoint_build
from checkpoints.snapshots import (
    snapshot_capture,
    snapshot_manifest,
    snapshot_materialise_if_missing,
    snapshot_restore,
)
from tasks.agent_state import AgentState
from tests.checkpoints.conftest import files_of, mode_of

pytestmark = pytest.mark.django_db(transaction=True)


def _age(root: Path, seconds: float = 10) -> None:
    """Back-date every file, as if written a while ago (outside the racy window)."""
    past = time.time_ns() - int(seconds * 1e9)
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, ns=(past, past))


@pytest.fixture
def workspace(tmp_path) -> Path:
    root = tmp_path / "source"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "README.md").write_text("# project\n")
    (root / "src" / "pkg" / "main.py").write_text("print('hi')\n")
    (root / "bin.dat").write_bytes(bytes(range(256)) * 3 + b"\x00\xff")
    (root / "empty.txt").write_bytes(b"")
    run = root / "run.sh"
    run.write_text("#!/bin/sh\necho run\n")
    run.chmod(0o755)
    secret = root / "src" / "secret.key"
    secret.write_text("k")
    secret.chmod(0o600)
    return root


def test_materialising_a_snapshot_into_an_empty_directory_reproduces_bytes_and_modes(
    workspace, tmp_path
):
    snapshot = snapshot_capture(workspace=workspace)
    assert snapshot["files"] == 6

    target = tmp_path / "elsewhere"
    snapshot_restore(workspace=target, snapshot=snapshot)

    originals = sorted(p.relative_to(workspace) for p in workspace.rglob("*") if p.is_file())
    copies = sorted(p.relative_to(target) for p in target.rglob("*") if p.is_file())
    assert copies == originals
    for rel in originals:
        assert (target / rel).read_bytes() == (workspace / rel).read_bytes(), rel
        assert mode_of(target / rel) == mode_of(workspace / rel), rel
    assert mode_of(target / "run.sh") == 0o755
    assert mode_of(target / "src" / "secret.key") == 0o600


def test_manifest_paths_are_relative_so_snapshots_restore_anywhere(workspace):
    manifest = snapshot_manifest(snapshot_capture(workspace=workspace))
    assert set(manifest) == {
        "README.md",
        "src/pkg/main.py",
        "bin.dat",
        "empty.txt",
        "run.sh",
        "src/secret.key",
    }
    assert manifest["run.sh"].mode == 0o755
    assert manifest["README.md"].size == len("# project\n")


def test_restore_writes_changed_files_deletes_extra_ones_and_leaves_the_rest(workspace):
    _age(workspace)
    snapshot = snapshot_capture(workspace=workspace)
    untouched_inode = (workspace / "README.md").stat().st_ino

    (workspace / "src" / "pkg" / "main.py").write_text("print('broken')\n")
    (workspace / "run.sh").chmod(0o644)
    (workspace / "bin.dat").unlink()
    (workspace / "new" / "deep").mkdir(parents=True)
    (workspace / "new" / "deep" / "extra.txt").write_text("extra")
    (workspace / "link").symlink_to("/etc/passwd")

    result = snapshot_restore(workspace=workspace, snapshot=snapshot)

    assert result.written == ["bin.dat", "src/pkg/main.py"]
    assert result.deleted == ["new/deep/extra.txt"]
    assert result.links == ["link"]
    assert result.folders == ["new", "new/deep"]
    assert result.modes == ["run.sh"]
    assert (workspace / "src" / "pkg" / "main.py").read_text() == "print('hi')\n"
    assert mode_of(workspace / "run.sh") == 0o755
    assert not (workspace / "new").exists()
    assert not (workspace / "link").is_symlink()
    assert (workspace / "README.md").stat().st_ino == untouched_inode
    # A folder emptied by the deletions is recreated for a file the snapshot has in it.
    (workspace / "src" / "pkg" / "main.py").unlink()
    (workspace / "src" / "secret.key").unlink()
    (workspace / "src" / "other.txt").write_text("extra")
    snapshot_restore(workspace=workspace, snapshot=snapshot)
    assert snapshot_capture(workspace=workspace)["root"] == snapshot["root"]


def test_capture_reuses_the_hash_of_a_file_whose_size_and_mtime_are_unchanged(workspace):
    _age(workspace)
    first = snapshot_capture(workspace=workspace)
    readme = workspace / "README.md"
    before = readme.stat()
    # Same size, same inode, same mtime: capture trusts its index and does not read the file.
    with open(readme, "r+b") as fh:
        fh.write(b"@")
    os.utime(readme, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert snapshot_capture(workspace=workspace)["root"] == first["root"]
    # A real change (the mtime moves) is captured.
    readme.write_text("# changed!\n")
    changed = snapshot_capture(workspace=workspace)
    assert changed["root"] != first["root"]
    assert snapshot_manifest(changed)["README.md"].size == len("# changed!\n")


def test_a_same_size_rewrite_right_after_a_capture_is_still_captured(tmp_path):
    root = tmp_path / "racy"
    root.mkdir()
    conf = root / "app.conf"
    conf.write_text("v1")
    first = snapshot_capture(workspace=root)
    conf.write_text("v2")  # possibly within the same timestamp tick
    os.utime(conf, ns=(conf.stat().st_atime_ns, conf.stat().st_mtime_ns))
    second = snapshot_capture(workspace=root)
    assert second["root"] != first["root"]


def test_the_snapshot_index_is_kept_outside_the_workspace(workspace):
    before = sorted(p.name for p in workspace.rglob("*"))
    snapshot_capture(workspace=workspace)
    assert sorted(p.name for p in workspace.rglob("*")) == before


def test_a_missing_workspace_is_materialised_but_an_existing_one_is_left_alone(workspace, tmp_path):
    snapshot = snapshot_capture(workspace=workspace)
    wiped = tmp_path / "wiped"
    wiped.mkdir()
    assert snapshot_materialise_if_missing(workspace=wiped, manifest=snapshot) is True
    assert files_of(wiped) == files_of(workspace)

    (wiped / "README.md").write_text("local edit")
    assert snapshot_materialise_if_missing(workspace=wiped, manifest=snapshot) is False
    assert (wiped / "README.md").read_text() == "local edit"
    assert snapshot_materialise_if_missing(workspace=wiped, manifest=snapshot, sync=True)
    assert (wiped / "README.md").read_text() == "# project\n"


def test_identical_files_are_stored_once_across_workspaces(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "same.txt").write_text("shared content " * 100)
    snapshot_capture(workspace=tmp_path / "a")
    count = Blob.objects.count()
    snapshot_capture(workspace=tmp_path / "b")
    assert Blob.objects.count() == count  # same file, same single-chunk manifest, same root


def test_200_checkpoints_over_500_files_store_less_than_twice_the_data(tmp_path):
    root = tmp_path / "big"
    root.mkdir()
    size = 1024
    for i in range(500):
        sub = root / f"dir{i % 10}"
        sub.mkdir(exist_ok=True)
        (sub / f"file{i:03}.txt").write_text(os.urandom(size // 2).hex())
    _age(root)
    workspace_bytes = 500 * size
    changed_bytes = 0
    payload_bytes = 0
    state = AgentState()
    for step in range(200):
        if step:
            target = root / f"dir{step % 10}" / f"file{(step * 7) % 500:03}.txt"
            target.write_text(os.urandom(size // 2).hex())
            changed_bytes += size
        state.step_index = step
        checkpoint = checkpoint_build(
            task_id=None,
            seq=step + 1,
            state=state,
            level="step",
            trigger="after_step",
            snapshot=snapshot_capture(workspace=root),
        )
        payload_bytes += len(checkpoint.payload)
    blob_bytes = Blob.objects.aggregate(n=Sum(Length("data")))["n"]
    stored = blob_bytes + payload_bytes
    assert stored < 2 * (workspace_bytes + changed_bytes), (
        blob_bytes,
        payload_bytes,
        workspace_bytes,
        changed_bytes,
    )


def test_a_capture_after_a_preview_still_stores_the_files_the_preview_hashed(workspace, tmp_path):
    from checkpoints.snapshots import workspace_manifest

    _age(workspace)
    snapshot_capture(workspace=workspace)
    (workspace / "README.md").write_text("# edited before the preview\n")
    workspace_manifest(workspace)  # a rollback preview hashes it without uploading
    snapshot = snapshot_capture(workspace=workspace)
    copy = tmp_path / "copy"
    snapshot_restore(workspace=copy, snapshot=snapshot)
    assert (copy / "README.md").read_text() == "# edited before the preview\n"


def test_a_blob_deleted_behind_the_index_is_stored_again_once_trust_expires(
    workspace, tmp_path, monkeypatch
):
    from checkpoints.snapshots import capture

    _age(workspace)
    first = snapshot_capture(workspace=workspace)
    Blob.objects.all().delete()  # e.g. collected by retention
    monkeypatch.setattr(capture, "TRUST_STORED_S", 0)
    assert snapshot_capture(workspace=workspace)["root"] == first["root"]
    snapshot_restore(workspace=tmp_path / "copy", snapshot=first)
    assert files_of(tmp_path / "copy") == files_of(workspace)


def test_an_empty_folder_in_the_snapshot_survives_a_restore_and_is_made_when_missing(
    workspace, tmp_path
):
    from checkpoints.snapshots import loading

    (workspace / "out").mkdir()
    (workspace / "cache" / "deep").mkdir(parents=True)
    snapshot = snapshot_capture(workspace=workspace)
    loading._manifests.clear()  # read the manifest back from the stored blobs
    manifest = snapshot_manifest(snapshot)
    assert manifest.folders == {"out", "cache/deep"}
    assert "out/" not in manifest and snapshot["files"] == 6

    # Later: a file in one, the other removed, a new empty folder.
    (workspace / "out" / "x.txt").write_text("x")
    (workspace / "cache" / "deep").rmdir()
    (workspace / "later").mkdir()
    result = snapshot_restore(workspace=workspace, snapshot=snapshot)

    assert result.deleted == ["out/x.txt"]
    assert result.folders == ["later"]
    assert result.made == ["cache/deep"]
    assert (workspace / "out").is_dir() and not any((workspace / "out").iterdir())
    assert (workspace / "cache" / "deep").is_dir()
    assert not (workspace / "later").exists()
    assert snapshot_capture(workspace=workspace)["root"] == snapshot["root"]
    # Elsewhere, the empty folders come with the files.
    elsewhere = tmp_path / "elsewhere"
    snapshot_restore(workspace=elsewhere, snapshot=snapshot)
    assert (elsewhere / "out").is_dir() and (elsewhere / "cache" / "deep").is_dir()
