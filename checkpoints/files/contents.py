"""One file: its page (`file_view`, text or binary), its bytes, its diff between two
checkpoints."""

from __future__ import annotations

from dataclasses import dataclass

from checkpoints.blobstore import BlobCorrupted, BlobMissing
from checkpoints.files.workspace import FilesUnreadable, WorkspaceAt, read
from checkpoints.selectors import FileDiff, file_changes
from checkpoints.snapshots import FileEntry
from tasks.errors import NotFound

# Bytes of a file shown on its page (and returned as text by the API); the rest is a download.
VIEW_MAX_BYTES = 1024 * 1024
# Bytes looked at for a NUL when deciding whether a file is binary (as git does).
BINARY_SNIFF_BYTES = 8000


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
    text, truncated = text_of(read(path, entry))
    return FileView(path=path, entry=entry, text=text, truncated=truncated)


def file_bytes(*, at: WorkspaceAt, path: str) -> tuple[FileEntry, bytes]:
    entry = at.entry(path)
    return entry, read(path, entry)


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
