"""The shared directory of a multi-agent group: a root task whose TaskSpec sets `shared: true`
gives every agent of its group one directory besides their own workspaces.

- Where: `HARNESS_WORKSPACE_ROOT/shared/<root task id>/` (on several machines the workspace
  root must then be a shared filesystem; blobs of its snapshots are in the blob store).
- How agents reach it: the built-in file tools take `/shared/<path>` (tasks.paths.SHARED_MOUNT);
  `run_command` sees it read-write at /shared in its sandbox. It is hostile territory like a
  workspace: every file operation goes through tasks.paths (no `..`, no symlinks followed, no
  hard-linked files written).
- Writes are serialised per path: the file tools change a shared file only under
  `shared_write_lock` (a PostgreSQL advisory lock on the group and the path, held for the
  write; on SQLite — one machine — a lock file beside the directory). Commands are not
  serialised: a command writing /shared races the others like any two processes.
- Snapshots: a committed global checkpoint records the directory's snapshot
  (GlobalCheckpoint.shared_snapshot, captured while every participant is held), and a group
  rollback restores it with the participants' workspaces, all or nothing
  (multiagent.recovery).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.db import connection, transaction

from checkpoints.snapshots import snapshot_capture
from tasks.models import Task
from tasks.paths import validate_relative_path
from tasks.selectors import group_has_shared, group_shared_path, shared_path


def shared_dir(task: Task) -> Path | None:
    """The shared directory of the task's group, created if missing; None when the group's
    root did not ask for one."""
    path = group_shared_path(task)
    if path is not None:
        path.mkdir(parents=True, exist_ok=True)
    return path


def _lock_key(directory: Path, path: str) -> int:
    # The normalised path ("a/./b" and "a//b" are "a/b"), so two spellings share one lock.
    name = f"{directory.name}\0{validate_relative_path(path)}"
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


@contextlib.contextmanager
def shared_write_lock(*, directory: Path, path: str) -> Iterator[None]:
    """Hold the write lock of one path of a shared directory (every worker, every machine).
    Lock contract: a transaction-level advisory lock, so a worker killed mid-write releases
    it with its connection; taken alone, never while holding task or round rows."""
    if connection.vendor == "postgresql":
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_lock_key(directory, path)])
            yield
        return
    # SQLite runs on one machine: a lock file beside the directory (never inside it, where an
    # agent could replace it), for the whole directory.
    with open(directory.parent / f".{directory.name}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def shared_snapshot_capture(*, root: Task) -> dict | None:
    """The group's shared directory as a snapshot (None: the group has none). The coordinator
    calls it while every participant is held, so no file tool is writing."""
    if not group_has_shared(root):
        return None
    path = shared_path(root_id=root.id)
    path.mkdir(parents=True, exist_ok=True)
    return snapshot_capture(workspace=path)


def shared_files(*, root: Task, limit: int = 200) -> list[dict[str, Any]] | None:
    """The files of the group's shared directory as they are now ({path, size}, by path, at
    most `limit`); None when the group has none. Links are listed as nothing: never followed."""
    if not group_has_shared(root):
        return None
    base = shared_path(root_id=root.id)
    files = []
    for folder, dirs, names in os.walk(base, followlinks=False):
        dirs.sort()
        for name in sorted(names):
            info = os.lstat(os.path.join(folder, name))
            if stat.S_ISREG(info.st_mode):
                relative = Path(folder, name).relative_to(base).as_posix()
                files.append({"path": f"/shared/{relative}", "size": info.st_size})
            if len(files) >= limit:
                return files
    return files
