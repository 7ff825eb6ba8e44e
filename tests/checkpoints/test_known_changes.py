"""No survey for known effects: the built-in file tools report the files they change, the
snapshot after them scans only those files' folders, and it is exactly what a full survey
of the workspace gives. Commands and other tools still get a full survey."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_decode
from checkpoints.snapshots import index as snapshot_index
from checkpoints.snapshots import scan as snapshot_scan
from checkpoints.snapshots import snapshot_capture, snapshot_manifest, workspace_manifest
from tasks.tools.registry import ToolContext, registry
from tests.checkpoints.conftest import spec_dict

pytestmark = pytest.mark.django_db(transaction=True)

FOLDERS = 40


@pytest.fixture
def workspace(tmp_path) -> Path:
    root = tmp_path / "ws"
    for i in range(FOLDERS):
        folder = root / f"d{i}" / "sub"
        folder.mkdir(parents=True)
        (folder / "a.txt").write_text(f"a{i}")
        (root / f"d{i}" / "b.txt").write_text(f"b{i}")
    # Written a while ago: outside the racy window, in which a folder is always scanned again.
    past = time.time_ns() - 10 * 10**9
    for path in root.rglob("*.txt"):
        os.utime(path, ns=(past, past))
    return root


@pytest.fixture
def scans(monkeypatch) -> list[str]:
    """Every directory the snapshot code lists (os.scandir itself still runs)."""
    seen: list[str] = []
    real = os.scandir

    def counting(path):
        seen.append(str(path))
        return real(path)

    monkeypatch.setattr(snapshot_scan.os, "scandir", counting)
    return seen


def call(tool: str, workspace: Path, **args) -> set[str]:
    spec = registry.get(tool)
    ctx = ToolContext(task_id="t", call_id="c", workspace=workspace, timeout_s=5)
    spec.func(ctx, spec.args_model.model_validate(args))
    return ctx.changed


def fresh_survey(workspace: Path) -> dict:
    snapshot_index._indexes.clear()
    return snapshot_capture(workspace=workspace)


def test_reported_changes_are_scanned_alone_and_give_what_a_full_survey_gives(workspace, scans):
    snapshot_capture(workspace=workspace)
    changed = (
        call("write_file", workspace, path="d3/sub/a.txt", content="new content")
        | call("write_file", workspace, path="new/deep/c.txt", content="c")
        | call("append_file", workspace, path="d7/b.txt", content="+more")
        | call("delete_file", workspace, path="d9/sub/a.txt")
        | call("read_file", workspace, path="d1/b.txt")
    )
    assert changed == {"d3/sub/a.txt", "new/deep/c.txt", "d7/b.txt", "d9/sub/a.txt"}

    scans.clear()
    known = snapshot_capture(workspace=workspace, changed=changed)

    # Not the 81 folders of the workspace: the changed files whose folders the index knows
    # are looked at alone (an lstat each; the deleted one is dropped from its folder's
    # listing); only the new folder is listed.
    assert sorted(Path(p).relative_to(workspace).as_posix() for p in scans) == ["new/deep"]
    full = fresh_survey(workspace)
    assert len(scans) > 2 * FOLDERS
    assert known == full
    assert snapshot_manifest(known) == workspace_manifest(workspace)


def test_without_reported_changes_the_whole_workspace_is_surveyed(workspace, scans):
    snapshot_capture(workspace=workspace)
    (workspace / "d5" / "sub" / "a.txt").write_text("changed by a command")
    scans.clear()
    snapshot = snapshot_capture(workspace=workspace)
    assert len(scans) > 2 * FOLDERS
    assert (
        snapshot_manifest(snapshot)["d5/sub/a.txt"] == workspace_manifest(workspace)["d5/sub/a.txt"]
    )


def test_built_in_file_tools_report_their_changes_and_commands_do_not():
    for name in ("read_file", "list_files", "search_text", "write_file", "append_file"):
        assert registry.get(name).reports_changes, name
    assert registry.get("delete_file").reports_changes
    assert not registry.get("run_command").reports_changes


def test_a_run_of_file_tools_checkpoints_exactly_the_workspace(
    make_task, run_inline, scans, monkeypatch
):
    # The seeded files are written when the run starts and a scripted run takes a few ms a
    # step: inside the racy window their folders would be hashed again at every capture
    # (test_snapshots covers that rule). Here they count as settled, so what is measured is
    # the known-changes path alone.
    monkeypatch.setattr(snapshot_scan, "RACY_NS", 0)
    task = make_task(
        spec_dict(
            {"call": "write_file", "args": {"path": "a/one.txt", "content": "1"}},
            {"call": "write_file", "args": {"path": "b/two.txt", "content": "2"}},
            {"call": "append_file", "args": {"path": "a/one.txt", "content": "+"}},
            {"call": "delete_file", "args": {"path": "b/two.txt"}},
            {"call": "read_file", "args": {"path": "a/one.txt"}},
            {"final": "done"},
            tools=["write_file", "append_file", "delete_file", "read_file"],
            workspace={"files": {f"seed/{i}/x.txt": str(i) for i in range(20)}},
        )
    )
    assert run_inline(task) == "succeeded"
    scanned = len(scans)
    head = Checkpoint.objects.get(id=task.head_checkpoint_id)
    manifest = snapshot_manifest(checkpoint_decode(head).snapshot)
    assert manifest == workspace_manifest(task.workspace_path)
    assert set(manifest) == {"a/one.txt", *(f"seed/{i}/x.txt" for i in range(20))}
    # One full survey when the run starts (the root, seed/, its 20 folders, a/, b/ as the
    # first calls create them); after that only the folders the tools touched — where a survey
    # per snapshot would list all 24 folders for each of the 5 calls.
    # The disk quota walks the workspace once more, at the first write (agent/tools/quota.py
    # keeps the measure for the later ones).
    full = 1 + 1 + 20
    assert scanned <= 2 * full + 2 * 5, scans
