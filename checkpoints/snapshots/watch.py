"""WorkspaceWatch: which files of a workspace changed since the last look, from Linux inotify, so
that the snapshot after an SDK agent's tool (which does not say what it wrote) looks at those
files only (snapshot_capture's `changed`) instead of listing every folder of the workspace:
a workspace of n files cost n lstat calls at every tools node.

`changed()` -> the relative paths of the files created, written, closed after writing, given
new attributes, deleted or moved in or out since the last call; or None when the watch cannot
say, and the caller surveys the whole workspace as it would without one:

- the first call (the watch is set up then: what changed before it is unknown);
- a folder created, deleted, moved or given new attributes (its watches are set up again, then
  the survey sees it whole);
- the kernel's event queue overflowed, a watch was dropped, the workspace itself moved;
- no watch at all: not Linux, the per-user limit of inotify instances or watches reached
  (fs.inotify.max_user_instances / max_user_watches), the workspace gone.

A folder is watched before it is listed, so a folder made while the watch is set up raises an
event on its parent's watch (and the watch is set up again). What inotify does not report: a
write through a shared memory map raises no event (closing the descriptor it was mapped from
does, IN_CLOSE_WRITE), nor a write to a file through a hard link outside the workspace. Such a
change is seen by the next survey of its folder. The survey by lstat has a like limit for
mapped writes (the kernel updates mtime at the first write fault after a writeback, not at
every write)."""

from __future__ import annotations

import errno
import logging
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from inotify_simple import INotify
from inotify_simple import flags as F

log = logging.getLogger(__name__)

FILE_EVENTS = F.CREATE | F.MODIFY | F.ATTRIB | F.CLOSE_WRITE | F.DELETE | F.MOVED_FROM | F.MOVED_TO
MASK = FILE_EVENTS | F.DELETE_SELF | F.MOVE_SELF | F.DONT_FOLLOW | F.ONLYDIR | F.EXCL_UNLINK
# Events after which the watch cannot name what changed: set it up again, survey all.
LOST = F.Q_OVERFLOW | F.IGNORED | F.DELETE_SELF | F.MOVE_SELF | F.UNMOUNT | F.ISDIR


# The per-user limits and no inotify at all: no watch for the rest of the run.
UNAVAILABLE = {errno.ENOSPC, errno.EMFILE, errno.ENFILE, errno.ENOSYS, errno.EPERM}


def changed_paths(events: Iterable[Any], prefixes: dict[int, str]) -> set[str] | None:
    """The relative paths `events` name (their watch's folder prefix + name), or None when one
    of them says the watch lost track (see the module)."""
    paths = set()
    for event in events:
        prefix = prefixes.get(event.wd)
        if event.mask & LOST or prefix is None or not event.name:
            return None
        paths.add(prefix + event.name)
    return paths


class WorkspaceWatch:
    """One run's watch of its workspace (see the module). `close()` releases it."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.inotify: Any = None
        self.prefixes: dict[int, str] = {}  # watch descriptor -> "a/b/" ("" for the root)
        # inotify is Linux's (elsewhere the package imports, and fails at the first call).
        self.unavailable = not sys.platform.startswith("linux")

    def changed(self) -> set[str] | None:
        """The paths changed since the last call, or None: survey everything (the module)."""
        if self.unavailable:
            return None
        if self.inotify is None:
            self._start()
            return None
        try:
            paths = changed_paths(self.inotify.read(timeout=0), self.prefixes)
        except OSError as exc:
            log.warning("workspace watch of %s failed (%s): surveying instead", self.root, exc)
            paths = None
        if paths is None:
            self._start()
        return paths

    def _start(self) -> None:
        """Every folder of the workspace watched anew, each before it is listed (before the
        survey the caller makes). A folder gone meanwhile: no watch until the next call (which
        surveys); the per-user limits: none for the run."""
        self.close()
        root = str(self.root)
        try:
            self.inotify = INotify()  # type: ignore[no-untyped-call]  # no annotations
            todo = [""]
            while todo:
                prefix = todo.pop()
                folder = os.path.join(root, prefix) if prefix else root
                self.prefixes[self.inotify.add_watch(folder, MASK)] = prefix
                with os.scandir(folder) as entries:
                    todo += [
                        f"{prefix}{entry.name}/"
                        for entry in entries
                        if entry.is_dir(follow_symlinks=False)
                    ]
        except OSError as exc:
            self.close()
            if exc.errno in UNAVAILABLE:
                log.warning("no workspace watch of %s (%s): surveying every step", root, exc)
                self.unavailable = True

    def close(self) -> None:
        if self.inotify is not None:
            self.inotify.close()
        self.inotify = None
        self.prefixes = {}
