"""The workspace as a checkpoint saw it, read-only: the file browser of the task page, its
downloads and its API (`checkpoints.file_views`, `checkpoints.files_api`).

Everything is read from the checkpoint's snapshot (its manifest and the content-addressed
blobs), never from a workspace directory: the workspace may live on another machine, and a
path from a request is only ever a key looked up in the manifest, never joined to a folder.
"Head" is the task's head checkpoint. Nothing here writes."""

from __future__ import annotations

import io
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone

from checkpoints.blobstore import BlobCorrupted, BlobMissing, blob_store
from checkpoints.models import Checkpoint
from checkpoints.selectors import FileDiff, checkpoint_get, entry_dict, file_changes
from checkpoints.services import CheckpointCorrupted, checkpoint_decode
from checkpoints.snapshots import FileEntry, Manifest, snapshot_manifest
from tasks.errors import NotFound
from tasks.models import Task

# Bytes of a file shown on its page (and returned as text by the API); the rest is a download.
VIEW_MAX_BYTES = 1024 * 1024
# Bytes looked at for a NUL when deciding whether a file is binary (as git does).
BINARY_SNIFF_BYTES = 8000
# Entries one folder of the tree lists on the page, and files the API lists at once.
FOLDER_SHOWN = 1000
API_LIST_MAX = 5000
PATH_MAX_CHARS = 4096
# File bodies fetched from the blob store at once while an archive streams.
ARCHIVE_BATCH_BYTES = 8 * 1024 * 1024
ARCHIVE_BATCH_FILES = 200
ARCHIVE_FORMATS = ("zip", "tar.gz")


class FilesInvalid(ValueError):
    """A request parameter is malformed (a 422 naming the field)."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name
        self.message = message


class FilesUnreadable(Exception):
    """The checkpoint fails verification or its snapshot's blobs cannot be read."""


@dataclass(frozen=True)
class WorkspaceAt:
    """The task's workspace at one checkpoint (None: the task has none yet)."""

    task: Task
    checkpoint: Checkpoint | None
    manifest: Manifest

    @property
    def is_head(self) -> bool:
        return self.checkpoint is not None and self.checkpoint.id == self.task.head_checkpoint_id

    @property
    def total_bytes(self) -> int:
        return sum(entry.size for entry in self.manifest.values())

    def entry(self, path: str) -> FileEntry:
        """The manifest entry of `path`: the only way a path from a request reaches a file."""
        entry = self.manifest.get(path)
        if entry is None:
            raise NotFound(f"no file {path!r} at this checkpoint")
        return entry

    def as_dict(self) -> dict[str, Any] | None:
        cp = self.checkpoint
        if cp is None:
            return None
        return {"id": str(cp.id), "seq": cp.seq, "name": cp.name, "head": self.is_head}


def file_path_check(path: Any) -> str:
    """A path parameter as given (never normalised: it must equal a manifest key), or
    FilesInvalid when it is missing or could not be one."""
    if not isinstance(path, str) or not path:
        raise FilesInvalid("path", "required: a file's path relative to the workspace")
    if len(path) > PATH_MAX_CHARS:
        raise FilesInvalid("path", f"at most {PATH_MAX_CHARS} characters")
    if "\x00" in path:
        raise FilesInvalid("path", "NUL characters are not allowed")
    return path


def head_checkpoint(task: Task) -> Checkpoint | None:
    """The task's head checkpoint, or its newest one when no head is recorded."""
    if task.head_checkpoint_id is not None:
        head = Checkpoint.objects.filter(task=task, id=task.head_checkpoint_id).first()
        if head is not None:
            return head
    return Checkpoint.objects.filter(task=task).order_by("-seq").first()


def workspace_at(*, task: Task, checkpoint_id: Any = None) -> WorkspaceAt:
    """The task's workspace at one of its checkpoints (`checkpoint_id`), or at the head when
    it is None or "". NotFound for a checkpoint that is not the task's; FilesUnreadable when
    the checkpoint or its snapshot fails verification."""
    if checkpoint_id in (None, ""):
        checkpoint = head_checkpoint(task)
    else:
        checkpoint = checkpoint_get(task=task, checkpoint_id=checkpoint_id)
    if checkpoint is None:
        return WorkspaceAt(task=task, checkpoint=None, manifest={})
    try:
        manifest = snapshot_manifest(checkpoint_decode(checkpoint).snapshot)
    except (CheckpointCorrupted, BlobMissing, BlobCorrupted) as exc:
        raise FilesUnreadable(f"checkpoint #{checkpoint.seq} cannot be read: {exc}") from None
    return WorkspaceAt(task=task, checkpoint=checkpoint, manifest=manifest)


def _read(path: str, entry: FileEntry) -> bytes:
    try:
        return blob_store().get(entry.hash)
    except (BlobMissing, BlobCorrupted) as exc:
        raise FilesUnreadable(f"{path}: the content cannot be read ({exc})") from None


# --- the tree -------------------------------------------------------------------------------


@dataclass
class FolderListing:
    """One folder of the tree: its subfolders (with the files and bytes under each) and its
    files, folders first, by name; at most FOLDER_SHOWN entries (`hidden` more)."""

    folder: str
    crumbs: list[tuple[str, str]]
    folders: list[dict[str, Any]] = field(default_factory=list)
    files: list[dict[str, Any]] = field(default_factory=list)
    hidden: int = 0


def folder_check(folder: Any) -> str:
    """A folder parameter: "" (the root) or a path without a trailing slash."""
    if not isinstance(folder, str):
        return ""
    if len(folder) > PATH_MAX_CHARS or "\x00" in folder:
        raise FilesInvalid("dir", f"a folder path of at most {PATH_MAX_CHARS} characters")
    return folder.strip("/")


def folder_crumbs(folder: str) -> list[tuple[str, str]]:
    """(name, folder path) of each folder from the root down to `folder`."""
    parts = folder.split("/") if folder else []
    return [(part, "/".join(parts[: depth + 1])) for depth, part in enumerate(parts)]


def folder_listing(*, at: WorkspaceAt, folder: str) -> FolderListing:
    """The entries of `folder` ("" = the root). NotFound when no file of the manifest is
    under it (the root of an empty workspace is listed, empty)."""
    prefix = f"{folder}/" if folder else ""
    folders: dict[str, dict[str, Any]] = {}
    files: list[dict[str, Any]] = []
    for path, entry in at.manifest.items():
        if not path.startswith(prefix):
            continue
        name, slash, _ = path[len(prefix) :].partition("/")
        if slash:
            sub = folders.setdefault(
                name, {"name": name, "path": prefix + name, "files": 0, "bytes": 0}
            )
            sub["files"] += 1
            sub["bytes"] += entry.size
        else:
            files.append({"name": name, "path": path, "size": entry.size, "mode": entry.mode})
    if folder and not folders and not files:
        raise NotFound(f"no folder {folder!r} at this checkpoint")
    entries = sorted(folders.values(), key=lambda f: f["name"])
    listing = FolderListing(folder=folder, crumbs=folder_crumbs(folder))
    listing.folders = entries[:FOLDER_SHOWN]
    listing.files = sorted(files, key=lambda f: f["name"])[: FOLDER_SHOWN - len(listing.folders)]
    listing.hidden = len(entries) + len(files) - len(listing.folders) - len(listing.files)
    return listing


def files_list(*, at: WorkspaceAt, prefix: str = "") -> tuple[list[dict[str, Any]], bool]:
    """(the files whose path starts with `prefix`, by path, at most API_LIST_MAX; whether
    there were more)."""
    paths = sorted(p for p in at.manifest if p.startswith(prefix))
    rows = [{"path": p, **(entry_dict(at.manifest[p]) or {})} for p in paths[:API_LIST_MAX]]
    return rows, len(paths) > API_LIST_MAX


# --- one file ---------------------------------------------------------------------------------


@dataclass
class FileView:
    path: str
    entry: FileEntry
    # The text shown (at most VIEW_MAX_BYTES of it); None for a binary file.
    text: str | None
    truncated: bool

    @property
    def binary(self) -> bool:
        return self.text is None


def text_of(body: bytes, *, limit: int = VIEW_MAX_BYTES) -> tuple[str | None, bool]:
    """(the first `limit` bytes as UTF-8 text, whether there was more), or (None, False) for a
    binary file: a NUL in its first bytes or bytes that are not UTF-8."""
    if b"\x00" in body[:BINARY_SNIFF_BYTES]:
        return None, False
    head = body[:limit]
    truncated = len(body) > limit
    try:
        return head.decode("utf-8"), truncated
    except UnicodeDecodeError as exc:
        # A cut inside a multi-byte character is not a binary file.
        if truncated and exc.start >= len(head) - 3:
            try:
                return head[: exc.start].decode("utf-8"), True
            except UnicodeDecodeError:
                pass
        return None, False


def file_view(*, at: WorkspaceAt, path: str) -> FileView:
    entry = at.entry(path)
    text, truncated = text_of(_read(path, entry))
    return FileView(path=path, entry=entry, text=text, truncated=truncated)


def file_bytes(*, at: WorkspaceAt, path: str) -> tuple[FileEntry, bytes]:
    entry = at.entry(path)
    return entry, _read(path, entry)


def file_diff(*, a: WorkspaceAt, b: WorkspaceAt, path: str) -> FileDiff | None:
    """How `path` changed from `a` to `b` (the shared diff of checkpoints.selectors), None
    when it is the same in both. NotFound when neither has it."""
    if path not in a.manifest and path not in b.manifest:
        raise NotFound(f"no file {path!r} at either checkpoint")
    try:
        changes = file_changes(before=a.manifest, after=b.manifest, paths=[path])
    except (BlobMissing, BlobCorrupted) as exc:
        raise FilesUnreadable(f"{path}: the content cannot be read ({exc})") from None
    return changes[0] if changes else None


# --- the whole tree as one download ----------------------------------------------------------


def archive_refusal(at: WorkspaceAt) -> str:
    """Why the tree may not be downloaded as one archive ('' when it may)."""
    files, size = len(at.manifest), at.total_bytes
    max_files, max_bytes = settings.HARNESS_ARCHIVE_MAX_FILES, settings.HARNESS_ARCHIVE_MAX_BYTES
    if files > max_files:
        return (
            f"the tree has {files} files, more than the {max_files} one download may hold "
            "(HARNESS_ARCHIVE_MAX_FILES); download files one by one or use the API"
        )
    if size > max_bytes:
        return (
            f"the tree holds {size} bytes, more than the {max_bytes} one download may hold "
            "(HARNESS_ARCHIVE_MAX_BYTES); download files one by one or use the API"
        )
    return ""


class _Sink(io.RawIOBase):
    """A write-only, unseekable stream whose bytes are taken out as they come: the archive
    writers write into it and the response sends what they wrote, file by file."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.parts.append(bytes(data))
        return len(data)

    def take(self) -> bytes:
        out, self.parts = b"".join(self.parts), []
        return out


def _bodies(at: WorkspaceAt) -> Iterator[tuple[str, FileEntry, bytes]]:
    """(path, entry, content) of every file by path, fetched in bounded batches."""
    store = blob_store()
    batch: list[str] = []
    size = 0
    paths = sorted(at.manifest)
    for n, path in enumerate(paths):
        batch.append(path)
        size += at.manifest[path].size
        if size >= ARCHIVE_BATCH_BYTES or len(batch) >= ARCHIVE_BATCH_FILES or n == len(paths) - 1:
            bodies = store.get_many({at.manifest[p].hash for p in batch})
            for p in batch:
                yield p, at.manifest[p], bodies[at.manifest[p].hash]
            batch, size = [], 0


def _zip(at: WorkspaceAt, sink: _Sink, moment: datetime) -> Iterator[bytes]:
    stamp = max(moment.timetuple()[:6], (1980, 1, 1, 0, 0, 0))
    with zipfile.ZipFile(sink, mode="w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path, entry, body in _bodies(at):
            info = zipfile.ZipInfo(path, date_time=stamp)
            info.external_attr = (0o100000 | entry.mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, body)
            yield sink.take()
    yield sink.take()


def _tar_gz(at: WorkspaceAt, sink: _Sink, moment: datetime) -> Iterator[bytes]:
    with tarfile.open(fileobj=sink, mode="w|gz") as archive:
        for path, entry, body in _bodies(at):
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = entry.size, entry.mode, int(moment.timestamp())
            archive.addfile(info, io.BytesIO(body))
            yield sink.take()
    yield sink.take()


def archive_stream(*, at: WorkspaceAt, fmt: str) -> Iterator[bytes]:
    """The tree as a zip or tar.gz, produced file by file as it is sent (memory holds one
    batch of file bodies, never the archive). Call archive_refusal first."""
    if fmt not in ARCHIVE_FORMATS:
        raise FilesInvalid("format", f"one of {', '.join(ARCHIVE_FORMATS)}")
    moment = at.checkpoint.created_at if at.checkpoint is not None else timezone.now()
    writer = _zip if fmt == "zip" else _tar_gz
    return (chunk for chunk in writer(at, _Sink(), moment) if chunk)


def archive_name(at: WorkspaceAt, fmt: str) -> str:
    seq = at.checkpoint.seq if at.checkpoint is not None else 0
    return f"task-{str(at.task.id)[:8]}-checkpoint-{seq}.{fmt}"
