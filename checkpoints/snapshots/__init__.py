"""Workspace snapshots (DESIGN §4): capture, load, restore, materialise.

A snapshot is a manifest {relative path -> (content hash, size, mode)} plus the file bodies as
content-addressed, compressed blobs in the configured blob store (`checkpoints.blobstore`),
stored once across checkpoints and tasks.

The manifest itself is stored as blobs too, so a checkpoint carries only a small reference
(`{"v", "root", "files", "bytes"}`, inside its checksum): the sorted entries are cut into
chunks at content-defined boundaries (after a path whose crc32 is 0 mod CHUNK_TARGET), each
chunk is a blob, and a root blob lists the chunk hashes. Changing one file re-stores one chunk
and the root (~2 KB), not the whole manifest, and unchanged workspaces share every blob. The
root hash covers the chunks, which cover the files, and blobs are verified on read, so the
checkpoint checksum protects the whole tree.

A run's checkpoints may instead name the root of the manifest last stored in full and list
the few entries that differ from it (`{"v": 2, "root", "delta", ...}`, capture's `delta`): a
step that writes one file then adds one entry to its checkpoint instead of storing a chunk
and a root. The delta's file bodies are counted by retention directly.

Capture is incremental: a per-process index (in memory, keyed by workspace and blob store —
never inside the workspace, so it is never captured) remembers each file's size, mtime, inode
and hash. A file whose stat is unchanged reuses its hash without being read. As in git's
"racy clean" rule, a file modified within RACY_NS of the scan that hashed it is re-hashed next
time, because a same-size rewrite inside one timestamp tick would otherwise go unnoticed.
Only blobs that are new since the previous capture are checked against the store (one batched
existence query), and only those missing are uploaded. When the caller knows which files
changed (the built-in file tools report them), only those files are looked at again (one
lstat each, with the racy ones), not the workspace nor their whole directories.

The modules, from the bottom: `manifest` (FileEntry, Manifest, the stored entries and their
chunks), `index` (what a process remembers of each workspace), `scan` (one directory),
`survey` (the whole workspace, workspace_manifest), `loading` (snapshot_manifest,
snapshot_blob_keys), `capture` (snapshot_capture) and `restore` (the plan, the restore,
materialising). Callers import from this package.
"""

from __future__ import annotations

from checkpoints.snapshots.capture import (
    DEFER_BLOB_BYTES,
    DELTA_MAX,
    TRUST_STORED_S,
    snapshot_capture,
    snapshot_distrust,
)
from checkpoints.snapshots.index import INDEX_LIMIT
from checkpoints.snapshots.loading import (
    MANIFEST_CACHE_LIMIT,
    snapshot_blob_keys,
    snapshot_delta_files,
    snapshot_manifest,
)
from checkpoints.snapshots.manifest import (
    CHUNK_MAX,
    CHUNK_TARGET,
    SNAPSHOT_VERSION,
    FileEntry,
    Manifest,
)
from checkpoints.snapshots.restore import (
    RestoreResult,
    manifest_changes,
    removed_paths,
    restore_blocked,
    snapshot_materialise_if_missing,
    snapshot_restore,
    snapshot_restore_plan,
)
from checkpoints.snapshots.scan import RACY_NS, UPLOAD_BATCH_BYTES
from checkpoints.snapshots.survey import workspace_manifest

__all__ = [
    "CHUNK_MAX",
    "CHUNK_TARGET",
    "DEFER_BLOB_BYTES",
    "DELTA_MAX",
    "INDEX_LIMIT",
    "MANIFEST_CACHE_LIMIT",
    "RACY_NS",
    "SNAPSHOT_VERSION",
    "TRUST_STORED_S",
    "UPLOAD_BATCH_BYTES",
    "FileEntry",
    "Manifest",
    "RestoreResult",
    "manifest_changes",
    "removed_paths",
    "restore_blocked",
    "snapshot_blob_keys",
    "snapshot_delta_files",
    "snapshot_capture",
    "snapshot_distrust",
    "snapshot_manifest",
    "snapshot_materialise_if_missing",
    "snapshot_restore",
    "snapshot_restore_plan",
    "workspace_manifest",
]
