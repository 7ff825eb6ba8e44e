"""The workspace as a checkpoint saw it, read-only: the file browser of the task page, its
downloads and its API (`checkpoints.file_views`, `checkpoints.files_api`).

Everything is read from the checkpoint's snapshot (its manifest and the content-addressed
blobs), never from a workspace directory: the workspace may live on another machine, and a
path from a request is only ever a key looked up in the manifest, never joined to a folder.
"Head" is the task's head checkpoint. Nothing here writes.

The modules, from the bottom: `workspace` (WorkspaceAt, workspace_at, the errors, the path
check), `tree` (a folder's listing, the list of files), `contents` (one file: its view, bytes,
diff) and `archives` (the tree as a zip or tar.gz). Callers import from this package.
"""

from __future__ import annotations

from checkpoints.files.archives import (
    ARCHIVE_BATCH_BYTES,
    ARCHIVE_BATCH_FILES,
    ARCHIVE_FORMATS,
    archive_name,
    archive_refusal,
    archive_stream,
)
from checkpoints.files.contents import (
    BINARY_SNIFF_BYTES,
    VIEW_MAX_BYTES,
    FileView,
    file_bytes,
    file_diff,
    file_view,
    text_of,
)
from checkpoints.files.tree import (
    API_LIST_MAX,
    FOLDER_SHOWN,
    FolderListing,
    files_list,
    folder_check,
    folder_crumbs,
    folder_listing,
)
from checkpoints.files.workspace import (
    PATH_MAX_CHARS,
    FilesInvalid,
    FilesUnreadable,
    WorkspaceAt,
    file_path_check,
    head_checkpoint,
    workspace_at,
)

__all__ = [
    "API_LIST_MAX",
    "ARCHIVE_BATCH_BYTES",
    "ARCHIVE_BATCH_FILES",
    "ARCHIVE_FORMATS",
    "BINARY_SNIFF_BYTES",
    "FOLDER_SHOWN",
    "PATH_MAX_CHARS",
    "VIEW_MAX_BYTES",
    "FileView",
    "FilesInvalid",
    "FilesUnreadable",
    "FolderListing",
    "WorkspaceAt",
    "archive_name",
    "archive_refusal",
    "archive_stream",
    "file_bytes",
    "file_diff",
    "file_path_check",
    "file_view",
    "files_list",
    "folder_check",
    "folder_crumbs",
    "folder_listing",
    "head_checkpoint",
    "text_of",
    "workspace_at",
]
