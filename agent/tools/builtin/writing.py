"""The file tools that change a file: write_file, append_file, delete_file. Each is checked
against the disk quota before it writes, shown to a reviewer as a diff (its preview) and
recorded on the task page as the diff it made; a shared file changes under its path's write
lock."""

from __future__ import annotations

import contextlib
import difflib
from collections.abc import Iterator
from pathlib import Path

from agent.tools.builtin.paths import (
    MAX_WRITE_BYTES,
    AppendFileArgs,
    PathArgs,
    WriteFileArgs,
    place,
)
from agent.tools.quota import quota_check_write, quota_forget
from harness_base.config import harness_config
from multiagent.shared import shared_write_lock
from tasks.paths import (
    PathEscapeError,
    file_append,
    file_delete,
    file_read,
    file_write,
    resolve_in_workspace,
)
from tasks.tools.registry import PermanentToolError, ToolContext, tool

# A change is shown as a diff up to this size of either side (else by its sizes).
DIFF_MAX_BYTES = 256 * 1024


def _check_quota(ctx: ToolContext, path: str, *, adds: int, replaces: bool) -> None:
    """A write that would take the workspace (or the shared directory) past its disk quota
    is refused before anything is written."""
    root, inside, shared = place(ctx, path)
    quota_check_write(
        root=root,
        limit=harness_config().sandbox.disk_mb * 1024**2,
        name="the shared directory" if shared else "the workspace",
        path=inside,
        shown=path,
        adds=adds,
        replaces=replaces,
        known=not shared,
    )


@contextlib.contextmanager
def _changing(ctx: ToolContext, path: str) -> Iterator[tuple[Path, str]]:
    """Around a change of one file: a workspace file is recorded for the next snapshot, a
    shared one is changed under its path's write lock."""
    root, inside, shared = place(ctx, path)
    if not shared:
        ctx.record_change(resolve_in_workspace(root, inside))
        yield root, inside
        return
    resolve_in_workspace(root, inside)
    with shared_write_lock(directory=root, path=inside):
        yield root, inside


def _read_text(ctx: ToolContext, path: str) -> str | None:
    try:
        root, inside, _ = place(ctx, path)
        data = file_read(root, inside, MAX_WRITE_BYTES)
    except PathEscapeError:
        raise
    except PermanentToolError:  # a folder: the tool itself says so when it runs
        return None
    return None if data is None else data.decode(errors="replace")


def _diff(path: str, before: str | None, after: str | None) -> str:
    lines = difflib.unified_diff(
        (before or "").splitlines(keepends=True),
        (after or "").splitlines(keepends=True),
        fromfile=f"a/{path}" if before is not None else "/dev/null",
        tofile=f"b/{path}" if after is not None else "/dev/null",
    )
    return "".join(lines) or "(no change)"


def _before(root: Path, inside: str) -> bytes | None:
    """The file as it is, for the diff of a change (up to one byte past DIFF_MAX_BYTES)."""
    try:
        return file_read(root, inside, DIFF_MAX_BYTES + 1)
    except (PermanentToolError, OSError):  # a folder, a link: the change itself refuses it
        return None


def _record_diff(ctx: ToolContext, path: str, before: bytes | None, after: bytes | None) -> None:
    """What the call changed, for the task page (tasks.outputs); a large file by its sizes."""
    if any(side is not None and len(side) > DIFF_MAX_BYTES for side in (before, after)):
        sizes = " -> ".join(
            "none" if side is None else f"{len(side)}+ bytes" for side in (before, after)
        )
        ctx.output.attach(name="diff", data=f"{path}: {sizes} (too large to diff here)")
        return
    text = [None if side is None else side.decode(errors="replace") for side in (before, after)]
    ctx.output.attach(name="diff", data=_diff(path, *text))


def _write_preview(ctx: ToolContext, args: WriteFileArgs) -> str:
    return _diff(args.path, _read_text(ctx, args.path), args.content)


def _append_preview(ctx: ToolContext, args: AppendFileArgs) -> str:
    before = _read_text(ctx, args.path)
    return _diff(args.path, before, (before or "") + args.content)


def _delete_preview(ctx: ToolContext, args: PathArgs) -> str:
    return _diff(args.path, _read_text(ctx, args.path), None)


@tool(
    risk="write",
    side_effect=True,
    idempotent=True,
    timeout_s=20,
    preview=_write_preview,
    reports_changes=True,
)
def write_file(ctx: ToolContext, args: WriteFileArgs) -> dict:
    """Create or replace a text file in the workspace (or /shared/...)."""
    data = args.content.encode("utf-8")
    with _changing(ctx, args.path) as (root, inside):
        _check_quota(ctx, args.path, adds=len(data), replaces=True)
        before = _before(root, inside)
        file_write(root, inside, data)
    _record_diff(ctx, args.path, before, data)
    return {"path": args.path, "bytes": len(data)}


@tool(
    risk="write",
    side_effect=True,
    idempotent=False,
    timeout_s=20,
    preview=_append_preview,
    reports_changes=True,
)
def append_file(ctx: ToolContext, args: AppendFileArgs) -> dict:
    """Append text to a file in the workspace or /shared/... (creating it if missing)."""
    data = args.content.encode("utf-8")
    with _changing(ctx, args.path) as (root, inside):
        _check_quota(ctx, args.path, adds=len(data), replaces=False)
        before = _before(root, inside)
        size = file_append(root, inside, data)
    _record_diff(ctx, args.path, before, (before or b"") + data)
    return {"path": args.path, "size": size}


@tool(
    risk="destructive",
    side_effect=True,
    idempotent=True,
    timeout_s=20,
    preview=_delete_preview,
    reports_changes=True,
)
def delete_file(ctx: ToolContext, args: PathArgs) -> dict:
    """Delete a file from the workspace (or /shared/...)."""
    with _changing(ctx, args.path) as (root, inside):
        before = _before(root, inside)
        deleted = file_delete(root, inside)
        quota_forget(root)
    if deleted:
        _record_diff(ctx, args.path, before, None)
    return {"path": args.path, "deleted": deleted}
