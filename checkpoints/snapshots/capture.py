"""Capturing a workspace: the incremental survey, the file bodies and manifest chunks the store
lacks uploaded (or deferred to the checkpoint's own write), -> the snapshot reference."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from checkpoints.blobstore import BlobStore, blob_key, blob_store, blob_store_deferred
from checkpoints.models import Blob
from checkpoints.snapshots.index import IndexedDir, SnapshotBase, WorkspaceIndex, index_for
from checkpoints.snapshots.manifest import CHUNK_MAX, SNAPSHOT_VERSION, entry_serialise
from checkpoints.snapshots.survey import empty_folders, survey, survey_known
from tasks import beacon
from tasks.canonical import canonical_bytes

TRUST_STORED_S = 600
# Entries a snapshot may list against the last manifest stored in full (`delta`) before a new
# one is stored: every checkpoint until then carries the list (~50 compressed bytes an entry,
# about three checkpoints a step), a full store costs a chunk and a root (~2 KB).
DELTA_MAX = 4
# The `v` of a reference that lists changes against its root.
DELTA_VERSION = 2
# Compressed bytes of new blobs a capture may leave to its caller's write (`defer`).
DEFER_BLOB_BYTES = 4 * 1024 * 1024


def snapshot_capture(
    *,
    workspace: Path,
    changed: Iterable[str] | None = None,
    defer: dict[str, Blob] | None = None,
    delta: bool = False,
) -> dict[str, Any]:
    """Capture the workspace; -> the snapshot reference stored in the checkpoint payload.

    `changed`: the relative paths of every file changed since this process last captured
    this workspace, when the changes are known (the harness's own file tools report them):
    only their directories are scanned, not the whole workspace. None: survey everything.

    `defer`: with blobs in the database, the new ones (up to DEFER_BLOB_BYTES) are not stored
    but added to it as unsaved rows, for the caller to insert in the write of the checkpoint
    that references them (one transaction instead of two). A caller whose write then fails
    calls `snapshot_distrust`.

    `delta`: when at most DELTA_MAX entries differ from the manifest this process last stored
    in full for the workspace (and its blobs are still known stored), the reference names that
    manifest's root and lists the differences (`"delta"`: entries, or `[path]` for one gone)
    instead of storing a new root and chunk: a step that wrote one file stores ~100 bytes in
    its checkpoint instead of a chunk and a root (~2 KB). Retention counts the listed file
    bodies directly (checkpoints.retention)."""
    root = Path(workspace)
    store = blob_store() if defer is None else blob_store_deferred(defer, DEFER_BLOB_BYTES)
    index = index_for(root)
    with index.lock:
        # Retention deletes blobs no checkpoint references any more (after a grace period far
        # longer than this), so "already stored" is trusted only for a while.
        if time.monotonic() - index.referenced_at > TRUST_STORED_S:
            index.referenced = set()
        if changed is not None and index.dirs:
            dirs, stored = survey_known(root, index, store, changed)
        else:
            dirs, stored = survey(root, index, store)
        hashes = set().union(*(d.hashes for d in dirs.values()))
        # Hashes the index reused (or a preview / restore computed without uploading) that
        # this process has not seen stored recently.
        unverified = hashes - index.referenced - stored
        if unverified:
            _upload_missing_files(root, dirs, store, unverified)
        entries = _entries(dirs) if delta else None
        changes = _delta(index, entries) if entries is not None else None
        if changes is not None and index.base is not None:
            index.referenced = hashes | index.base.keys
            index.referenced_at = time.monotonic()
            listed = {"v": DELTA_VERSION, "delta": changes} if changes else {"v": SNAPSHOT_VERSION}
            return {
                **listed,
                "root": index.base.root,
                "files": sum(d.files for d in dirs.values()),
                "bytes": sum(d.bytes for d in dirs.values()),
            }
        chunks: list[str] = []
        new_blobs: dict[str, bytes] = {}
        parts: list[bytes] = []
        count = 0

        def close() -> None:
            body = b"[" + b",".join(parts) + b"]"
            digest = blob_key(body)
            chunks.append(digest)
            if digest not in index.referenced:
                new_blobs[digest] = body

        # Chunks follow the canonical order (directories by prefix, files by name) and end at
        # content-defined cuts, so an edit re-stores only the chunk around it. An empty
        # folder is an entry of its own (its prefix, no hash), where its files would be.
        empty = empty_folders(dirs)
        for prefix in sorted(dirs):
            segments = dirs[prefix].segments
            if prefix in empty:
                body, cut = entry_serialise((prefix, "", 0, 0))
                segments = [(body, cut, 1)]
            for body, cut, n in segments:
                parts.append(body)
                count += n
                if cut or count >= CHUNK_MAX:
                    close()
                    parts, count = [], 0
        if parts:
            close()
        root_body = canonical_bytes({"v": SNAPSHOT_VERSION, "chunks": chunks})
        root_hash = blob_key(root_body)
        if root_hash not in index.referenced:
            new_blobs[root_hash] = root_body
        store.put_absent(new_blobs)
        referenced = hashes
        referenced.update(chunks)
        referenced.add(root_hash)
        index.referenced = referenced
        index.referenced_at = time.monotonic()
        if entries is not None:
            index.base = SnapshotBase(root_hash, entries, frozenset([root_hash, *chunks]))
    return {
        "v": SNAPSHOT_VERSION,
        "root": root_hash,
        "files": sum(d.files for d in dirs.values()),
        "bytes": sum(d.bytes for d in dirs.values()),
    }


def _entries(dirs: dict[str, IndexedDir]) -> dict[str, bytes]:
    """{path: serialised entry} of every file and empty folder (its path ends with "/")."""
    entries = {
        prefix + name: known[6][0] for prefix, d in dirs.items() for name, known in d.known.items()
    }
    for prefix in empty_folders(dirs):
        entries[prefix] = entry_serialise((prefix, "", 0, 0))[0]
    return entries


def _delta(index: WorkspaceIndex, entries: dict[str, bytes]) -> list[list[Any]] | None:
    """The entries that differ from the index's base manifest (sorted by path; `[path]` for
    one the base has and the workspace no longer), or None: no usable base (none yet, or its
    blobs not known stored: distrusted, or trusted too long ago), or too many changes."""
    base = index.base
    if base is None or not base.keys <= index.referenced:
        return None
    old = base.entries
    changed = [path for path, body in entries.items() if old.get(path) != body]
    if len(changed) > DELTA_MAX:
        return None
    gone = [path for path in old.keys() - entries.keys()]
    if len(changed) + len(gone) > DELTA_MAX:
        return None
    listed: list[list[Any]] = [json.loads(entries[path]) for path in changed]
    listed += [[path] for path in gone]
    return sorted(listed, key=lambda entry: entry[0])


def snapshot_distrust(workspace: Path) -> None:
    """Forget which blobs this process believes the store holds for the workspace: blobs a
    capture deferred (`defer`) to a write that failed are not stored after all."""
    index = index_for(Path(workspace))
    with index.lock:
        index.referenced = set()
        index.referenced_at = 0.0
        index.base = None


def _upload_missing_files(
    root: Path, dirs: dict[str, IndexedDir], store: BlobStore, keys: set[str]
) -> None:
    """Make sure the store holds these file bodies (one existence query per batch of keys),
    reading from the workspace only the ones it lacks."""
    by_hash = {
        k[3]: prefix + name
        for prefix, d in dirs.items()
        for name, k in d.known.items()
        if k[3] in keys
    }
    for key in store.missing(by_hash):
        beacon.progress("snapshot")
        content = (root / by_hash[key]).read_bytes()
        if blob_key(content) == key:
            store.put_many({key: content})
