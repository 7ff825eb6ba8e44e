"""The whole tree as one download: whether it may be (`archive_refusal`), and the zip or
tar.gz streamed file by file (`archive_stream`)."""

from __future__ import annotations

import io
import tarfile
import zipfile
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone

from checkpoints.blobstore import blob_store
from checkpoints.files.workspace import FilesInvalid, WorkspaceAt
from checkpoints.snapshots import FileEntry

# File bodies fetched from the blob store at once while an archive streams.
ARCHIVE_BATCH_BYTES = 8 * 1024 * 1024
ARCHIVE_BATCH_FILES = 200
ARCHIVE_FORMATS = ("zip", "tar.gz")


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
