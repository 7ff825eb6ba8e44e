"""The disk quota (harness.yaml `sandbox.disk_mb`): how much one workspace may hold in all,
and, separately, one multi-agent group's shared directory — across calls, not per call.

Measured as the bytes allocated on disk under the directory (`st_blocks`, so a sparse file
counts what it uses; folders count too). Every writing path keeps to it:

- the file tools (`write_file`, `append_file`) check before they write and refuse a write that
  would take the directory past its quota: nothing is written;
- a sandbox (`run_command`, a stdio MCP server's call) gets only what is left: the kernel caps
  every file it writes at the remaining quota (RLIMIT_FSIZE; a write past it fails with EFBIG),
  the directory is walked while it runs and once at the end, and a call that ends with it over
  its quota (several files written at once) is killed, and what it added is taken back: the
  files it created are deleted, the files it grew are cut back to their size before the call.

A directory already over its quota (the quota was lowered) may shrink but not grow. Taking
back applies to a workspace only: a shared directory is written by every agent of the group at
once, so its files cannot be told apart by call; there a call past the quota is killed and
reported, and no later call may grow the directory while it stays over.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path

from tasks.errors import PermanentToolError
from tasks.paths import file_delete, file_open, workspace_dir

# What a file may take beyond its bytes (its last block, extent and indirect blocks): the
# per-file cap of a sandbox leaves this much of the remaining quota unused.
FILE_SLACK_BYTES = 64 * 1024
BLOCK = 4096


class DiskQuotaExceeded(PermanentToolError):
    """A call that took (or would take) a directory past its quota; `limits_hit` for the
    model, like a sandbox's other limits."""

    limits_hit = ["disk"]


def mib(size: int) -> str:
    return f"{size / 1024**2:.1f} MiB"


@dataclass
class Tree:
    """What a directory holds on disk: the total, its regular files' sizes by relative path
    and its folders (for taking back what a call added)."""

    usage: int = 0
    files: dict[str, int] = field(default_factory=dict)
    folders: set[str] = field(default_factory=set)
    others: set[str] = field(default_factory=set)


# The last usage measured (or, after a file tool's write, computed) per directory in this
# process: a workspace is written by one run at a time, and every sandbox call walks it again
# at its end, so a file tool need not walk the whole workspace before each write. A shared
# directory, which other agents' processes write, is always walked.
_known: dict[str, int] = {}
_known_lock = threading.Lock()


def _key(root: Path) -> str:
    return os.path.realpath(root)


def _remember(root: Path, usage: int | None) -> None:
    with _known_lock:
        if usage is None:
            _known.pop(_key(root), None)
        else:
            _known[_key(root)] = usage


def disk_usage(root: Path, *, known: bool = False) -> int:
    """Bytes on disk under `root` (allocated blocks); `known`: the last measure this process
    has of it, if any, instead of a walk."""
    if known:
        with _known_lock:
            usage = _known.get(_key(root))
        if usage is not None:
            return usage
    return survey(root, detail=False).usage


def quota_forget(root: Path) -> None:
    """The directory changed in a way not measured (a file deleted): walk it next time."""
    _remember(root, None)


def survey(root: Path, *, detail: bool = True) -> Tree:
    """Walk `root` without following symlinks; with `detail`, note every entry."""
    tree = Tree()
    stack = [("", str(root))]
    while stack:
        prefix, directory = stack.pop()
        try:
            entries = os.scandir(directory)
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                tree.usage += info.st_blocks * 512
                rel = prefix + entry.name
                if stat.S_ISDIR(info.st_mode):
                    stack.append((rel + "/", entry.path))
                    if detail:
                        tree.folders.add(rel)
                elif stat.S_ISREG(info.st_mode):
                    if detail:
                        tree.files[rel] = info.st_size
                elif detail:
                    tree.others.add(rel)
    _remember(root, tree.usage)
    return tree


@dataclass
class DiskQuota:
    """One directory's quota for one call: what it held when the call started."""

    root: Path
    limit: int
    name: str = "the workspace"
    # A workspace's additions are taken back after a call past the quota; a shared
    # directory's cannot be told apart from other agents' (see the module docstring).
    take_back: bool = True
    before: Tree = field(default_factory=Tree)

    @classmethod
    def begin(cls, *, root: Path, limit: int, name: str, take_back: bool) -> DiskQuota:
        return cls(
            root=root,
            limit=limit,
            name=name,
            take_back=take_back,
            before=survey(root),
        )

    @property
    def allowed(self) -> int:
        """The most the directory may hold when the call ends: its quota, or what it held
        already if that was more (it may shrink, not grow)."""
        return max(self.limit, self.before.usage)

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.before.usage)

    def file_cap(self) -> int:
        """The size the kernel lets any one file reach during the call."""
        return max(0, self.remaining - FILE_SLACK_BYTES) // BLOCK * BLOCK

    def capped(self, cap: int, now: Tree) -> bool:
        """Whether a file the call wrote reached `cap` (the kernel refused a write at it):
        one that is new or changed size since the call began, at `cap` bytes or more."""
        before = self.before.files
        return any(size >= cap and before.get(rel) != size for rel, size in now.files.items())

    def over(self) -> int | None:
        """The directory's usage now when it is past what the call may leave, else None."""
        usage = disk_usage(self.root)
        return usage if usage > self.allowed else None

    def take_back_additions(self) -> list[str]:
        """Undo the call's growth (its processes are gone): delete what it created, cut back
        what it grew, remove the folders it made and left empty. -> what was changed."""
        now = survey(self.root)
        changed = []
        for rel in sorted(
            set(now.files) - set(self.before.files) | now.others - self.before.others
        ):
            with contextlib.suppress(OSError, PermanentToolError):
                file_delete(self.root, rel, any_entry=True)
                changed.append(rel)
        for rel, size in sorted(now.files.items()):
            old = self.before.files.get(rel)
            if old is not None and size > old:
                with contextlib.suppress(OSError, PermanentToolError):
                    fd = file_open(self.root, rel, os.O_WRONLY)
                    try:
                        os.ftruncate(fd, old)
                    finally:
                        os.close(fd)
                    changed.append(f"{rel} (cut back to {old} bytes)")
        for rel in sorted(now.folders - self.before.folders, key=len, reverse=True):
            parent, _, name = rel.rpartition("/")
            with contextlib.suppress(OSError, PermanentToolError):
                with workspace_dir(self.root, parent or ".") as dir_fd:
                    os.rmdir(name, dir_fd=dir_fd)
                changed.append(rel + "/")
        return changed

    def exceeded(self, *, usage: int, what: str) -> DiskQuotaExceeded:
        """The error for a call that left the directory at `usage`, past its quota, after
        taking back what it added (a workspace)."""
        message = (
            f'disk quota exceeded (limits_hit: ["disk"]): {what} took {self.name} to '
            f"{mib(usage)}, past its quota of {mib(self.limit)} (harness.yaml sandbox.disk_mb)"
        )
        if self.take_back:
            changed = self.take_back_additions()
            shown = ", ".join(changed[:5]) + (
                f" and {len(changed) - 5} more" if len(changed) > 5 else ""
            )
            message += (
                f"; what it added was taken back ({shown or 'nothing left to take back'}), "
                f"{self.name} holds {mib(disk_usage(self.root))}"
            )
        else:
            message += "; it cannot grow until files are removed"
        return DiskQuotaExceeded(message)


def quota_check_write(
    *,
    root: Path,
    limit: int,
    name: str,
    path: str,
    shown: str,
    adds: int,
    replaces: bool,
    known: bool,
) -> None:
    """Before a file tool writes `adds` bytes to `path` (inside `root`; `shown` as the model
    named it), replacing the file or appending to it: refuse, writing nothing, when the
    directory would go past its quota. `known`: trust this process's last measure of the
    directory (a workspace; see `_known`)."""
    usage = disk_usage(root, known=known)
    old = 0
    if replaces:
        with contextlib.suppress(OSError, PermanentToolError):
            fd = file_open(root, path)
            try:
                old = os.fstat(fd).st_blocks * 512
            finally:
                os.close(fd)
    after = usage - old + -(-adds // BLOCK) * BLOCK
    if after > max(limit, usage):
        raise DiskQuotaExceeded(
            f'disk quota exceeded (limits_hit: ["disk"]): writing {adds} bytes to {shown} '
            f"would take {name} to {mib(after)}, past its quota of {mib(limit)} (harness.yaml "
            f"sandbox.disk_mb; it holds {mib(usage)}); nothing was written, remove files first"
        )
    # The write follows at once; if it fails, this overstates the usage until the next walk.
    _remember(root, max(after, 0))
