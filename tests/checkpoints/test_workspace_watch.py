"""The workspace watch (checkpoints.snapshots.watch) behind the snapshots of SDK agents' steps:
a snapshot made from the files it names is exactly what a full survey of the workspace gives,
whatever the tools did (files written, appended, deleted, renamed across folders, given a new
mode; folders made, moved and removed; symlinks), and it lists no folder a step left alone.
When it cannot say (its first look, a folder changed, a lost event, no inotify), the caller
surveys everything."""

from __future__ import annotations

import errno
import os
import random
import shutil
import time
from pathlib import Path

import pytest
from inotify_simple import Event
from inotify_simple import flags as F

from checkpoints.snapshots import scan as snapshot_scan
from checkpoints.snapshots import snapshot_capture, snapshot_manifest, workspace_manifest
from checkpoints.snapshots.watch import WorkspaceWatch, changed_paths

pytestmark = pytest.mark.django_db(transaction=True)

PAST_NS = time.time_ns() - 3600 * 10**9


def _aged(path: Path) -> None:
    """Out of the racy window (a racy file is looked at again whatever the watch says): only
    the names the watch reports can make the snapshot right."""
    if path.is_file() and not path.is_symlink():
        os.utime(path, ns=(PAST_NS, PAST_NS))


def _capture(root: Path, watch: WorkspaceWatch) -> dict:
    return snapshot_manifest(snapshot_capture(workspace=root, changed=watch.changed(), delta=True))


@pytest.fixture
def workspace(tmp_path) -> Path:
    root = tmp_path / "ws"
    for i in range(6):
        (root / f"d{i}" / "sub").mkdir(parents=True)
        for name in ("a.txt", "sub/b.txt"):
            (root / f"d{i}" / name).write_text(f"{i} {name}")
    for path in root.rglob("*"):
        _aged(path)
    return root


def _operate(rng: random.Random, root: Path, step: int) -> None:
    files = sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())
    folders = sorted(p for p in root.rglob("*") if p.is_dir() and not p.is_symlink())
    op = rng.choice(["write", "write", "append", "delete", "rename", "move", "chmod", "link"])
    if step % 9 == 8:
        op = rng.choice(["mkdir", "rmdir", "mvdir"])
    target = rng.choice(files) if files else None
    if op == "write" or target is None:
        path = rng.choice(folders or [root]) / f"w{step}.txt"
        path.write_text(f"step {step}")
    elif op == "append":
        path = target
        with open(path, "a") as out:
            out.write(f" +{step}")
    elif op == "delete":
        target.unlink()
        return
    elif op == "rename":
        path = target.with_name(f"r{step}.txt")
        target.rename(path)
    elif op == "move":
        path = rng.choice(folders or [root]) / f"m{step}.txt"
        target.rename(path)
    elif op == "chmod":
        path = target
        path.chmod(0o755 if step % 2 else 0o644)
    elif op == "link":
        (target.parent / f"l{step}").symlink_to(target.name)
        return
    elif op == "mkdir":
        path = root / f"new{step}" / "inner" / "n.txt"
        path.parent.mkdir(parents=True)
        path.write_text("new")
    elif op == "rmdir":
        shutil.rmtree(rng.choice(folders))
        return
    else:  # mvdir
        source = rng.choice(folders)
        source.rename(root / f"moved{step}")
        return
    _aged(path)


def test_snapshots_from_the_watch_equal_full_surveys_whatever_the_tools_did(workspace):
    watch = WorkspaceWatch(workspace)
    rng = random.Random(47)
    try:
        assert _capture(workspace, watch) == workspace_manifest(workspace)
        op = 0
        for step in range(150):
            for _ in range(rng.randint(1, 3)):
                op += 1
                _operate(rng, workspace, op)
            assert _capture(workspace, watch) == workspace_manifest(workspace), step
    finally:
        watch.close()


def test_a_step_that_wrote_one_file_lists_no_folder(workspace, monkeypatch):
    listed: list[str] = []
    real = os.scandir
    monkeypatch.setattr(snapshot_scan.os, "scandir", lambda p: listed.append(str(p)) or real(p))
    watch = WorkspaceWatch(workspace)
    try:
        snapshot_capture(workspace=workspace, changed=watch.changed(), delta=True)
        listed.clear()
        (workspace / "d3" / "sub" / "b.txt").write_text("changed")
        _aged(workspace / "d3" / "sub" / "b.txt")
        manifest = _capture(workspace, watch)
        assert listed == []
        assert manifest == workspace_manifest(workspace)
    finally:
        watch.close()


def test_a_folder_made_means_a_full_survey_then_it_is_watched(workspace):
    watch = WorkspaceWatch(workspace)
    try:
        assert watch.changed() is None  # the first look: set up, nothing known yet
        assert watch.changed() == set()
        (workspace / "fresh").mkdir()
        assert watch.changed() is None  # a folder: set up again, survey all
        (workspace / "fresh" / "x.txt").write_text("x")
        assert watch.changed() == {"fresh/x.txt"}
    finally:
        watch.close()


def test_without_inotify_watches_every_call_says_survey(workspace, monkeypatch):
    def refused(self, path, mask):
        raise OSError(errno.ENOSPC, "No space left on device (inotify watches)")

    monkeypatch.setattr("inotify_simple.INotify.add_watch", refused)
    watch = WorkspaceWatch(workspace)
    assert [watch.changed(), watch.changed()] == [None, None]
    assert watch.unavailable and watch.inotify is None


def test_off_linux_there_is_no_watch_and_every_call_says_survey(workspace, monkeypatch):
    monkeypatch.setattr("checkpoints.snapshots.watch.sys.platform", "darwin")
    made = []
    monkeypatch.setattr("inotify_simple.INotify.__init__", lambda self, *a: made.append(1))
    watch = WorkspaceWatch(workspace)
    assert [watch.changed(), watch.changed()] == [None, None]
    assert made == [] and watch.inotify is None


def test_an_event_that_loses_track_means_a_full_survey():
    prefixes = {1: "", 2: "d/"}
    assert changed_paths([Event(2, F.MODIFY, 0, "a.txt")], prefixes) == {"d/a.txt"}
    assert changed_paths([Event(-1, F.Q_OVERFLOW, 0, "")], prefixes) is None
    assert changed_paths([Event(9, F.MODIFY, 0, "a.txt")], prefixes) is None
    assert changed_paths([Event(1, F.CREATE | F.ISDIR, 0, "new")], prefixes) is None
    assert changed_paths([Event(2, F.IGNORED, 0, "")], prefixes) is None
