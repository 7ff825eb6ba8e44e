"""The file tools that read: read_file, list_files, search_text (RE2)."""

from __future__ import annotations

import os
from pathlib import Path

from agent.tools.builtin.paths import (
    MAX_READ_BYTES,
    ListFilesArgs,
    ReadFileArgs,
    SearchTextArgs,
    place,
)
from harness_base.config import compile_pattern
from tasks.paths import (
    SHARED_MOUNT,
    PathEscapeError,
    file_read,
    relative_name,
    resolve_in_workspace,
)
from tasks.tools.registry import PermanentToolError, ToolContext, tool


def _shown(root: Path, path: Path, shared: bool) -> str:
    name = relative_name(root, path)
    return f"{SHARED_MOUNT}/{name}" if shared else name


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
    root, inside, _ = place(ctx, args.path)
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
    root, inside, shared = place(ctx, args.path)
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
    root, inside, shared = place(ctx, args.path)
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
