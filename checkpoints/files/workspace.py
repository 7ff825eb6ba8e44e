"""The workspace at one checkpoint (WorkspaceAt, `workspace_at`), the errors of this package,
the check of a path parameter, and reading one file's content from the blob store."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from checkpoints.blobstore import BlobCorrupted, BlobMissing, blob_store
from checkpoints.models import Checkpoint
from checkpoints.selectors import checkpoint_get
from checkpoints.services import CheckpointCorrupted, checkpoint_decode
from checkpoints.snapshots import FileEntry, Manifest, snapshot_manifest
from tasks.errors import NotFound
from tasks.models import Task

PATH_MAX_CHARS = 4096


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
        return WorkspaceAt(task=task, checkpoint=None, manifest=Manifest())
    try:
        manifest = snapshot_manifest(checkpoint_decode(checkpoint).snapshot)
    except (CheckpointCorrupted, BlobMissing, BlobCorrupted) as exc:
        raise FilesUnreadable(f"checkpoint #{checkpoint.seq} cannot be read: {exc}") from None
    return WorkspaceAt(task=task, checkpoint=checkpoint, manifest=manifest)


def read(path: str, entry: FileEntry) -> bytes:
    try:
        return blob_store().get(entry.hash)
    except (BlobMissing, BlobCorrupted) as exc:
        raise FilesUnreadable(f"{path}: the content cannot be read ({exc})") from None
