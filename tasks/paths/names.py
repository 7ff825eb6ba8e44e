"""Lexical checks of the paths tools are given, needing no filesystem: relative, inside the
workspace, within bounds; the shared directory's paths; which call arguments name paths."""

from __future__ import annotations

import fnmatch
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


# Bounds on a path that a task spec or a tool call names: a component at most the kernel's
# NAME_MAX, the whole well inside PATH_MAX once the workspace root is put in front of it, and
# a bounded depth. Paths a command makes are not held to them (a restore writes back whatever a
# snapshot holds); only names given to the harness are.
MAX_NAME_BYTES = 255
MAX_PATH_BYTES = 1024
MAX_PATH_DEPTH = 32


class PathTooLong(PermanentToolError):
    pass


def _shown_path(path: str) -> str:
    return repr(path if len(path) <= 60 else f"{path[:28]}…{path[-28:]}")


def check_path_bounds(path: str) -> None:
    """Refuse (PathTooLong, naming the path) a path that is not UTF-8 text or is longer than
    the bounds: MAX_NAME_BYTES per component, MAX_PATH_BYTES in all, MAX_PATH_DEPTH deep."""
    try:
        size = len(path.encode("utf-8"))
    except UnicodeEncodeError:
        raise PathTooLong(f"{_shown_path(path)} is not valid UTF-8 text") from None
    if size > MAX_PATH_BYTES:
        raise PathTooLong(
            f"{_shown_path(path)} is {size} bytes long; a path may be at most "
            f"{MAX_PATH_BYTES} bytes"
        )
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if len(parts) > MAX_PATH_DEPTH:
        raise PathTooLong(
            f"{_shown_path(path)} is {len(parts)} levels deep; at most {MAX_PATH_DEPTH}"
        )
    for part in parts:
        if len(part.encode("utf-8")) > MAX_NAME_BYTES:
            raise PathTooLong(
                f"{_shown_path(path)}: the name {_shown_path(part)} is "
                f"{len(part.encode('utf-8'))} bytes long; a file or folder name may be at most "
                f"{MAX_NAME_BYTES} bytes"
            )


# A multi-agent group's shared directory (TaskSpec `shared`): `/shared/<path>` in the file
# tools, mounted at the same place in the command sandbox.
SHARED_MOUNT = "/shared"


def shared_relative(path: str) -> str | None:
    """For `/shared/<path>`, the path inside the shared directory ("." for `/shared` itself);
    None for any other path (a workspace path, checked as usual). The rest is checked like a
    workspace path: `/shared/../x` and `/shared//etc` are refused, not normalised away."""
    if not isinstance(path, str):
        return None
    if path in (SHARED_MOUNT, SHARED_MOUNT + "/"):
        return "."
    if path.startswith(SHARED_MOUNT + "/"):
        return path[len(SHARED_MOUNT) + 1 :]
    return None


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
