"""Path confinement: tools see only relative paths inside the task's workspace. Anything that
would resolve outside it (`..`, an absolute path, a symlink anywhere on the way) is refused
before anything is touched.

A command in the workspace can plant symlinks and hard links between a check and a use, so the
file operations never re-resolve a path: they walk it one component at a time from a
descriptor of the workspace (`openat` with O_NOFOLLOW, Python's `dir_fd`), create temporary
files exclusively (O_EXCL) and refuse a file with more than one hard link (it may be the same
inode as a file outside the workspace). The modules, each importing only the one below it:

    files   the file operations (file_open, file_write, ...) and resolve_in_workspace
    names   the lexical checks (validate_relative_path, check_path_bounds), the shared
            directory's paths, the call arguments that name paths

This package re-exports the public names, so `from tasks.paths import file_write` keeps
working; code inside the package imports the module that holds a name."""

from __future__ import annotations

from tasks.paths.files import (
    file_append,
    file_chmod,
    file_delete,
    file_open,
    file_read,
    file_write,
    file_write_in_place,
    resolve_in_workspace,
    workspace_dir,
)
from tasks.paths.names import (
    MAX_NAME_BYTES,
    MAX_PATH_BYTES,
    MAX_PATH_DEPTH,
    PATH_ARGUMENTS,
    SHARED_MOUNT,
    PathEscapeError,
    PathTooLong,
    call_paths,
    check_path_bounds,
    glob_match,
    relative_name,
    shared_relative,
    validate_relative_path,
)

__all__ = [
    "MAX_NAME_BYTES",
    "MAX_PATH_BYTES",
    "MAX_PATH_DEPTH",
    "PATH_ARGUMENTS",
    "SHARED_MOUNT",
    "PathEscapeError",
    "PathTooLong",
    "call_paths",
    "check_path_bounds",
    "file_append",
    "file_chmod",
    "file_delete",
    "file_open",
    "file_read",
    "file_write",
    "file_write_in_place",
    "glob_match",
    "relative_name",
    "resolve_in_workspace",
    "shared_relative",
    "validate_relative_path",
    "workspace_dir",
]
