"""The file operations on a task's workspace (file_open, file_write, ...): each walks its path
one component at a time from a descriptor of the workspace and never follows a symlink (why:
this package's docstring)."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

from tasks.errors import PermanentToolError
from tasks.paths.names import PathEscapeError, validate_relative_path


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


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _refuse(path: str, exc: OSError) -> PathEscapeError:
    if exc.errno in (errno.ELOOP, errno.EMLINK):
        return PathEscapeError(f"{path!r} goes through a symlink; symlinks are not followed")
    if exc.errno == errno.ENOTDIR:
        return PathEscapeError(f"{path!r}: a parent of it is not a folder")
    return PathEscapeError(f"{path!r}: {exc.strerror}")


@contextlib.contextmanager
def workspace_dir(root: Path, path: str, *, create: bool = False) -> Iterator[int]:
    """A descriptor of the folder `path` (relative; "" or "." is the workspace), reached one
    component at a time without following symlinks; `create` makes missing folders."""
    parts = [] if path in ("", ".") else [p for p in validate_relative_path(path).parts if p != "."]
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # the root is trusted
    try:
        for part in parts:
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                # O_NOFOLLOW | O_DIRECTORY on a symlink fails with ENOTDIR, like a file would.
                error = OSError(errno.ELOOP, "symlink") if _is_symlink(fd, part) else exc
                raise _refuse(path, error) from None
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def _is_symlink(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _split(path: str) -> tuple[str, str]:
    pure = validate_relative_path(path)
    if pure.name in ("", "."):
        raise PathEscapeError("path must name a file inside the workspace")
    return str(pure.parent), pure.name


def _check_single_link(path: str, info: os.stat_result) -> None:
    if stat.S_ISDIR(info.st_mode):
        raise PermanentToolError(f"{path} is a folder")
    if stat.S_ISLNK(info.st_mode):
        raise PathEscapeError(f"{path!r} is a symlink; symlinks are not followed")
    if not stat.S_ISREG(info.st_mode):
        raise PathEscapeError(f"{path!r} is not a regular file")
    if info.st_nlink > 1:
        raise PathEscapeError(
            f"{path!r} has {info.st_nlink} hard links; a file linked from elsewhere is not "
            "read or changed"
        )


def file_open(root: Path, path: str, flags: int = os.O_RDONLY) -> int:
    """A descriptor of the existing regular file `path` (flags without O_CREAT/O_TRUNC),
    refusing symlinks anywhere on the way and files with more than one hard link."""
    folder, name = _split(path)
    with workspace_dir(root, folder) as dir_fd:
        try:
            fd = os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)
        except IsADirectoryError:
            raise PermanentToolError(f"{path} is a folder") from None
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise _refuse(path, exc) from None
    try:
        _check_single_link(path, os.fstat(fd))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def file_read(root: Path, path: str, max_bytes: int) -> bytes | None:
    """Up to `max_bytes` of the file, or None when it does not exist."""
    try:
        fd = file_open(root, path)
    except FileNotFoundError:
        return None
    with open(fd, "rb") as fh:
        return fh.read(max_bytes)


def file_write(root: Path, path: str, data: bytes, *, mode: int = 0o644) -> None:
    """Replace (or create) the file atomically: an exclusively created temporary file in the
    same folder, renamed over the target. A target that is a folder, a symlink or a file with
    other hard links is refused, not replaced."""
    folder, name = _split(path)
    with workspace_dir(root, folder, create=True) as dir_fd:
        try:
            _check_single_link(path, os.stat(name, dir_fd=dir_fd, follow_symlinks=False))
        except FileNotFoundError:
            pass
        tmp = f".{name[:100]}.{secrets.token_hex(8)}.harness-tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(tmp, flags, mode, dir_fd=dir_fd)
        try:
            with open(fd, "wb") as fh:
                fh.write(data)
                os.fchmod(fh.fileno(), mode)
            os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
            raise


def file_write_in_place(root: Path, path: str, data: bytes, *, mode: int) -> None:
    """Make the file hold `data`, rewriting it in place when it is a plain file of its own
    (fewer metadata operations than a rename); anything else at that name — a symlink, a
    folder, a file with other hard links — is removed first, never written through."""
    folder, name = _split(path)
    with workspace_dir(root, folder, create=True) as dir_fd:
        try:
            fd = os.open(
                name, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd
            )
        except FileNotFoundError:
            fd = None
        except OSError:  # a symlink (ELOOP), a folder (EISDIR), a fifo, ...
            fd = None
            _remove_entry(dir_fd, name)
        if fd is not None:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
                os.close(fd)
                fd = None
                _remove_entry(dir_fd, name)
        if fd is None:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(name, flags, 0o600, dir_fd=dir_fd)
        with open(fd, "wb") as fh:
            os.set_blocking(fd, True)
            fh.truncate(0)
            fh.write(data)
            os.fchmod(fh.fileno(), mode)


def _remove_entry(dir_fd: int, name: str) -> None:
    info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if stat.S_ISDIR(info.st_mode):
        shutil.rmtree(name, dir_fd=dir_fd)
    else:
        os.unlink(name, dir_fd=dir_fd)


def file_chmod(root: Path, path: str, mode: int) -> None:
    fd = file_open(root, path)
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def file_append(root: Path, path: str, data: bytes) -> int:
    """Append to the file (creating it exclusively when missing); -> its new size."""
    folder, name = _split(path)
    with workspace_dir(root, folder, create=True) as dir_fd:
        flags = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        try:
            fd = os.open(name, flags, dir_fd=dir_fd)
        except FileNotFoundError:
            fd = os.open(name, flags | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=dir_fd)
        except IsADirectoryError:
            raise PermanentToolError(f"{path} is a folder") from None
        except OSError as exc:
            raise _refuse(path, exc) from None
    with open(fd, "ab") as fh:
        _check_single_link(path, os.fstat(fd))
        os.set_blocking(fd, True)
        fh.write(data)
        fh.flush()
        return os.fstat(fd).st_size


def file_delete(root: Path, path: str, *, any_entry: bool = False) -> bool:
    """Remove the file's name from the workspace, never a folder. A symlink is refused, or
    with `any_entry` (a restore clearing what a snapshot does not have) removed itself, never
    followed. -> whether it existed."""
    folder, name = _split(path)
    try:
        with workspace_dir(root, folder) as dir_fd:
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                raise PermanentToolError(f"{path} is a folder; only files can be deleted")
            if stat.S_ISLNK(info.st_mode) and not any_entry:
                raise PathEscapeError(f"{path!r} is a symlink; symlinks are not followed")
            os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    return True
