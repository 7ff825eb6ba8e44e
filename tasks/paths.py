"""Path confinement: tools see only relative paths inside the task's workspace. Anything that
would resolve outside it (`..`, an absolute path, a symlink anywhere on the way) is refused
before anything is touched."""

from __future__ import annotations

import fnmatch
import os
import stat
from pathlib import Path, PurePosixPath
from typing import Any

from tasks.errors import PermanentToolError


class PathEscapeError(PermanentToolError):
    pass


def validate_relative_path(path: str) -> PurePosixPath:
    """Lexical checks that need no filesystem: non-empty, relative, no `..`, no NUL."""
    if not isinstance(path, str) or not path.strip():
        raise PathEscapeError("path must be a non-empty relative path")
    if "\x00" in path:
        raise PathEscapeError("path contains a NUL byte")
    pure = PurePosixPath(path)
    if pure.is_absolute() or path.startswith("~") or (len(path) > 1 and path[1] == ":"):
        raise PathEscapeError(f"{path!r} is absolute; use a path relative to the workspace")
    if any(part == ".." for part in pure.parts):
        raise PathEscapeError(f"{path!r} leaves the workspace ('..' is not allowed)")
    if pure == PurePosixPath("."):
        raise PathEscapeError("path must name a file or folder inside the workspace")
    return pure


def resolve_in_workspace(root: Path, path: str, *, allow_root: bool = False) -> Path:
    """The absolute path for `path` inside `root`, refusing symlinks on the way."""
    if allow_root and path in ("", "."):
        return root
    pure = validate_relative_path(path)
    current = root
    for part in pure.parts:
        if part == ".":
            continue
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            continue  # not created yet: nothing on disk can redirect it
        if stat.S_ISLNK(mode):
            raise PathEscapeError(f"{path!r} goes through a symlink; symlinks are not followed")
    resolved = current.resolve(strict=False)
    root_resolved = root.resolve(strict=False)
    if resolved != root_resolved and root_resolved not in resolved.parents:
        raise PathEscapeError(f"{path!r} resolves outside the workspace")
    return current


def relative_name(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix()


# Argument names that hold workspace paths, for policies and checks that look at paths.
PATH_ARGUMENTS = ("path", "src", "dst", "target")


def call_paths(args: dict[str, Any]) -> list[str]:
    return [str(args[k]) for k in PATH_ARGUMENTS if isinstance(args.get(k), str)]


def glob_match(path: str, pattern: str) -> bool:
    # `**/*.conf` should also match a top-level `app.conf`.
    return fnmatch.fnmatch(path, pattern) or (
        pattern.startswith("**/") and fnmatch.fnmatch(path, pattern[3:])
    )
