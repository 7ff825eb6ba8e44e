"""Loading a snapshot's manifest from its blobs (verified; the last few kept in memory), and
every blob a snapshot references."""

from __future__ import annotations

import json
from typing import Any

from checkpoints.blobstore import blob_store
from checkpoints.lru import BoundedCache
from checkpoints.snapshots.manifest import FileEntry, Manifest

MANIFEST_CACHE_LIMIT = 16
_manifests: BoundedCache[str, Manifest] = BoundedCache(MANIFEST_CACHE_LIMIT)


def snapshot_manifest(snapshot: dict[str, Any] | None) -> Manifest:
    """The manifest a snapshot reference points to (empty for None): its root's, with the
    changes it lists against it (`delta`, checkpoints.snapshots.capture) applied. Blobs are
    verified; raises BlobMissing / BlobCorrupted when the store cannot produce them."""
    if not snapshot:
        return Manifest()
    base = _root_manifest(snapshot["root"])
    delta = snapshot.get("delta")
    if not delta:
        return base
    manifest = Manifest(base)
    folders = set(base.folders)
    for entry in delta:
        rel = entry[0]
        if len(entry) == 1:  # gone since the root's manifest
            if rel.endswith("/"):
                folders.discard(rel[:-1])
            else:
                manifest.pop(rel, None)
        elif rel.endswith("/"):
            folders.add(rel[:-1])
        else:
            manifest[rel] = FileEntry(entry[1], entry[2], entry[3])
    manifest.folders = frozenset(folders)
    return manifest


def snapshot_delta_files(snapshot: dict[str, Any] | None) -> list[str]:
    """The file bodies a snapshot reference lists itself (its `delta`), beside its root's."""
    if not isinstance(snapshot, dict) or not isinstance(snapshot.get("delta"), list):
        return []
    return [entry[1] for entry in snapshot["delta"] if len(entry) == 4 and entry[1]]


def _root_manifest(root_hash: str) -> Manifest:
    cached = _manifests.get(root_hash)
    if cached is not None:
        return cached
    store = blob_store()
    root = json.loads(store.get(root_hash))
    chunks = store.get_many(root["chunks"])
    manifest = Manifest()
    folders = set()
    for digest in root["chunks"]:
        for rel, h, size, mode in json.loads(chunks[digest]):
            if rel.endswith("/"):
                folders.add(rel[:-1])
            else:
                manifest[rel] = FileEntry(h, size, mode)
    manifest.folders = frozenset(folders)
    _manifests.put(root_hash, manifest)
    return manifest


def snapshot_blob_keys(snapshot: dict[str, Any] | None) -> set[str]:
    """Every blob a snapshot references: root, chunks and file bodies (the root's, and those
    its delta lists)."""
    if not snapshot:
        return set()
    root = json.loads(blob_store().get(snapshot["root"]))
    return {snapshot["root"], *root["chunks"]} | {
        e.hash for e in snapshot_manifest(snapshot).values()
    }
