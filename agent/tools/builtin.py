"""The built-in tools (DESIGN §6). Every path is confined to the task's workspace, or, for
`/shared/<path>` in a multi-agent group with a shared directory, to that directory
(multiagent/shared.py), whose writes are serialised per path."""

from __future__ import annotations

import contextlib
import difflib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from agent.tools.quota import quota_check_write, quota_forget
from harness_base.config import compile_pattern, harness_config
from multiagent.shared import shared_write_lock
from tasks.paths import (
    SHARED_MOUNT,
    PathEscapeError,
    PathTooLong,
    check_path_bounds,
    file_append,
    file_delete,
    file_read,
    file_write,
    relative_name,
    resolve_in_workspace,
    shared_relative,
)
from tasks.tools.registry import PermanentToolError, ToolContext, tool

MAX_READ_BYTES = 256 * 1024
MAX_WRITE_BYTES = 10 * 1024 * 1024
# A change is shown as a diff up to this size of either side (else by its sizes).
DIFF_MAX_BYTES = 256 * 1024


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _bounded(path: str) -> str:
    try:
        check_path_bounds(path)
    except PathTooLong as exc:
        raise ValueError(str(exc)) from None
    return path


# A path a call names, within the bounds a task spec's paths have (tasks.paths), so an absurd
# name is an invalid argument told to the model, not an OSError inside the tool.
ToolPath = Annotated[str, AfterValidator(_bounded)]


class PathArgs(_Args):
    path: ToolPath = Field(
        description="file path relative to the workspace (or /shared/... in a group's shared "
        "directory)"
    )


class ReadFileArgs(PathArgs):
    max_bytes: int = Field(default=64 * 1024, ge=1, le=MAX_READ_BYTES)


class ListFilesArgs(_Args):
    path: ToolPath = Field(default=".", description="folder relative to the workspace (or /shared)")
    recursive: bool = True
    limit: int = Field(default=500, ge=1, le=10_000)


class SearchTextArgs(_Args):
    pattern: str = Field(min_length=1, max_length=1000, description="a regular expression")
    path: ToolPath = "."
    max_matches: int = Field(default=100, ge=1, le=2000)


class WriteFileArgs(PathArgs):
    content: str = Field(max_length=MAX_WRITE_BYTES)


class AppendFileArgs(PathArgs):
    content: str = Field(max_length=MAX_WRITE_BYTES)


def _place(ctx: ToolContext, path: str) -> tuple[Path, str, bool]:
    """(the directory, the path inside it, whether it is the group's shared directory)."""
    inside = shared_relative(path)
    if inside is None:
        return ctx.workspace, path, False
    if ctx.shared is None:
        raise PermanentToolError(
            f"{path}: this task has no shared directory (the group's root task sets "
            "`shared: true`); use a path relative to the workspace"
        )
    return ctx.shared, inside, True


def _check_quota(ctx: ToolContext, path: str, *, adds: int, replaces: bool) -> None:
    """A write that would take the workspace (or the shared directory) past its disk quota
    is refused before anything is written."""
    root, inside, shared = _place(ctx, path)
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
    root, inside, shared = _place(ctx, path)
    if not shared:
        ctx.record_change(resolve_in_workspace(root, inside))
        yield root, inside
        return
    resolve_in_workspace(root, inside)
    with shared_write_lock(directory=root, path=inside):
        yield root, inside


def _shown(root: Path, path: Path, shared: bool) -> str:
    name = relative_name(root, path)
    return f"{SHARED_MOUNT}/{name}" if shared else name


def _read_text(ctx: ToolContext, path: str) -> str | None:
    try:
        root, inside, _ = _place(ctx, path)
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


def _walk(root, start, recursive: bool):
    if start.is_file():
        yield start
        return
    for dirpath, dirnames, filenames in os.walk(start, followlinks=False):
        dirnames.sort()
        for name in sorted(filenames):
            yield start.__class__(dirpath) / name
        if not recursive:
            break


@tool(risk="read", timeout_s=10, reports_changes=True)
def read_file(ctx: ToolContext, args: ReadFileArgs) -> dict:
    """Read a text file from the workspace (or /shared/...)."""
    root, inside, _ = _place(ctx, args.path)
    data = file_read(root, inside, args.max_bytes + 1)
    if data is None:
        raise PermanentToolError(f"{args.path}: no such file")
    truncated = len(data) > args.max_bytes
    return {
        "path": args.path,
        "content": data[: args.max_bytes].decode("utf-8", errors="replace"),
        "truncated": truncated,
    }


@tool(risk="read", timeout_s=10, reports_changes=True)
def list_files(ctx: ToolContext, args: ListFilesArgs) -> dict:
    """List files in a workspace folder (or /shared) with their sizes."""
    root, inside, shared = _place(ctx, args.path)
    start = resolve_in_workspace(root, inside, allow_root=True)
    if not start.exists():
        raise PermanentToolError(f"{args.path}: no such folder")
    files = []
    for path in _walk(root, start, args.recursive):
        if path.is_symlink():
            continue
        files.append({"path": _shown(root, path, shared), "size": path.stat().st_size})
        if len(files) >= args.limit:
            break
    return {"files": files, "truncated": len(files) >= args.limit}


@tool(risk="read", timeout_s=20, reports_changes=True)
def search_text(ctx: ToolContext, args: SearchTextArgs) -> dict:
    """Search workspace text files for a regular expression (RE2 syntax: no backreferences or
    lookaround); returns path, line and text."""
    try:
        pattern = compile_pattern(args.pattern)
    except ValueError as exc:
        raise PermanentToolError(str(exc)) from None
    root, inside, shared = _place(ctx, args.path)
    start = resolve_in_workspace(root, inside, allow_root=True)
    matches = []
    for path in _walk(root, start, True):
        rel = relative_name(root, path)
        try:
            data = file_read(root, rel, MAX_READ_BYTES + 1)
            text = None if data is None or len(data) > MAX_READ_BYTES else data.decode()
        except (PathEscapeError, PermanentToolError, UnicodeDecodeError, OSError):
            continue
        if text is None:
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            if pattern.search(line):
                matches.append(
                    {"path": _shown(root, path, shared), "line": number, "text": line[:300]}
                )
                if len(matches) >= args.max_matches:
                    return {"matches": matches, "truncated": True}
    return {"matches": matches, "truncated": False}


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


# run_command and http_request live in their own modules; importing them registers them.
from agent.tools import command, http  # noqa: E402,F401
