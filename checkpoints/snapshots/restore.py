"""Restoring a workspace to a snapshot: what it would change (snapshot_restore_plan, the
preview), whether it can (restore_blocked), the restore itself under a per-workspace lock, and
rebuilding a missing workspace."""

from __future__ import annotations

import fcntl
import hashlib
import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkpoints.blobstore import batched, blob_store
from checkpoints.snapshots.index import WorkspaceIndex, index_for
from checkpoints.snapshots.loading import snapshot_manifest
from checkpoints.snapshots.manifest import Manifest
from checkpoints.snapshots.survey import manifest_of, survey
from tasks import beacon
from tasks.paths import (
    PathEscapeError,
    file_chmod,
    file_delete,
    file_write_in_place,
    workspace_dir,
)


@dataclass
class RestoreResult:
    """What a restore writes back, deletes and chmods. snapshot_restore_plan (a preview, a
    rollback's note) and snapshot_restore (the rollback) both take it from _restore_changes,
    so a preview lists exactly what the restore then does."""

    written: list[str]
    # Regular files the snapshot does not have.
    deleted: list[str]
    modes: list[str]
    # Symlinks and other entries that are not regular files (fifos, sockets): removed, never
    # followed; one where the snapshot has a file is replaced by it.
    links: list[str] = field(default_factory=list)
    # Folders holding nothing of the snapshot (its files, and its empty folders): removed once
    # what is in them is, empty ones included.
    folders: list[str] = field(default_factory=list)
    # Empty folders the snapshot has and the workspace lacks: made.
    made: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(
            self.written or self.deleted or self.modes or self.links or self.folders or self.made
        )


def removed_paths(result: RestoreResult) -> list[str]:
    """Everything a restore removes, as one list: files, links, and folders (with a `/`)."""
    return sorted([*result.deleted, *result.links, *(f"{rel}/" for rel in result.folders)])


def manifest_changes(current: Manifest, target: Manifest) -> tuple[list[str], list[str], list[str]]:
    """(paths to write, paths to delete, paths whose mode alone differs) to turn `current`
    into `target`."""
    write = sorted(p for p, e in target.items() if p not in current or current[p].hash != e.hash)
    delete = sorted(p for p in current if p not in target)
    modes = sorted(
        p
        for p, e in target.items()
        if p in current and current[p].hash == e.hash and current[p].mode != e.mode
    )
    return write, delete, modes


def _folders_of(paths: Iterable[str]) -> set[str]:
    """Every folder prefix ("a/", "a/b/") of the paths."""
    folders = set()
    for path in paths:
        parts = path.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            folders.add("/".join(parts[:depth]) + "/")
    return folders


def _restore_changes(root: Path, index: WorkspaceIndex, target: Manifest) -> RestoreResult:
    """What turns the workspace as surveyed now into `target`. Call with index.lock held."""
    dirs, _ = survey(root, index, None)
    write, delete, modes = manifest_changes(manifest_of(dirs), target)
    empty: frozenset[str] = getattr(target, "folders", frozenset())
    kept = _folders_of([*target, *(f"{folder}/" for folder in empty)])
    return RestoreResult(
        written=write,
        deleted=delete,
        modes=modes,
        links=sorted(rel for d in dirs.values() for rel in d.others),
        folders=sorted(prefix[:-1] for prefix in dirs if prefix and prefix not in kept),
        made=sorted(folder for folder in empty if f"{folder}/" not in dirs),
    )


def snapshot_restore_plan(*, workspace: Path, snapshot: dict[str, Any] | None) -> RestoreResult:
    """What snapshot_restore would write, delete and chmod now, computed without changing
    anything (it reads only the files changed since the last survey)."""
    root = Path(workspace)
    index = index_for(root)
    with index.lock:
        if not root.is_dir():
            target = snapshot_manifest(snapshot)
            return RestoreResult(
                written=sorted(target), deleted=[], modes=[], made=sorted(target.folders)
            )
        return _restore_changes(root, index, snapshot_manifest(snapshot))


def restore_blocked(workspace: Path) -> str:
    """Why files cannot be restored into this directory now ('' when they can): checked
    before a recovery commits, since its files are restored only after the commit."""
    root = Path(workspace)
    if root.is_symlink() or (root.exists() and not root.is_dir()):
        return f"{root.name} is not a directory"
    existing = root
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} is not writable"
    return ""


@contextmanager
def _restore_lock(root: Path) -> Iterator[None]:
    """One restore of a workspace at a time on this machine, across processes: an operator's
    recovery restoring files after its commit and a worker syncing the same workspace on start
    (checkpoints.recovery) do not interleave, so the worker's tools run on the finished tree.
    The lock file lives outside the workspace, so it is never captured."""
    folder = Path(tempfile.gettempdir()) / "harness-restore-locks"
    folder.mkdir(exist_ok=True)
    name = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:32]
    with open(folder / f"{name}.lock", "a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def snapshot_restore(*, workspace: Path, snapshot: dict[str, Any] | None) -> RestoreResult:
    """Make the workspace equal to the snapshot: write back files that differ (bytes and
    mode), delete files the snapshot does not have, leave identical files untouched.

    Slow file I/O: never call it inside a transaction that holds row locks (an operator's
    recovery commits first and restores after; see checkpoints.recovery)."""
    root = Path(workspace)
    root.mkdir(parents=True, exist_ok=True)
    target = snapshot_manifest(snapshot)
    index = index_for(root)
    with _restore_lock(root), index.lock:
        plan = _restore_changes(root, index, target)
        # Every write, delete and chmod goes through workspace descriptors without following
        # symlinks, and never writes through a hard link (tasks.paths): a command
        # may have planted either since the survey.
        for rel in [*plan.deleted, *plan.links]:
            file_delete(root, rel, any_entry=True)
        # Deepest first: a folder is empty once what is in it is gone. One that is not (it
        # changed since the survey) stays, and is not reported as removed.
        for rel in sorted(plan.folders, key=lambda p: p.count("/"), reverse=True):
            parent, _, name = rel.rpartition("/")
            try:
                with workspace_dir(root, parent or ".") as dir_fd:
                    os.rmdir(name, dir_fd=dir_fd)
            except (OSError, PathEscapeError):
                plan.folders.remove(rel)
        store = blob_store()
        for batch in batched(plan.written, 200):
            beacon.progress("restore")
            bodies = store.get_many({target[rel].hash for rel in batch})
            for rel in batch:
                file_write_in_place(root, rel, bodies[target[rel].hash], mode=target[rel].mode)
        for rel in plan.modes:
            file_chmod(root, rel, target[rel].mode)
        for rel in plan.made:
            with workspace_dir(root, rel, create=True):
                pass
    return plan


def _walk(root: Path) -> Iterator[str]:
    """Relative paths of everything under root that is not a directory; symlinks are never
    followed."""
    stack = [("", str(root))]
    while stack:
        prefix, directory = stack.pop()
        try:
            it = os.scandir(directory)
        except (FileNotFoundError, NotADirectoryError):
            continue
        with it:
            for entry in it:
                if entry.is_dir(follow_symlinks=False):
                    stack.append((prefix + entry.name + "/", entry.path))
                else:
                    yield prefix + entry.name


def snapshot_materialise_if_missing(
    *, workspace: Path, manifest: dict[str, Any] | None, sync: bool = False
) -> bool:
    """Rebuild the workspace from a snapshot when it holds no files here (another machine, a
    wiped disk); with `sync` (after an operator's recovery), also bring an existing workspace
    in line with it. -> True when files were written or deleted."""
    if manifest is None:
        return False
    root = Path(workspace)
    if sync:
        return snapshot_restore(workspace=root, snapshot=manifest).changed
    if not manifest.get("files") or next(_walk(root), None) is not None:
        return False
    snapshot_restore(workspace=root, snapshot=manifest)
    return True
