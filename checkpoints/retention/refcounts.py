"""Blob reference counts (BlobRef): `blob_refs_add` moves the counts of blobs and of what they
list, `blobs_count` counts the checkpoints and graph workspaces written since the last run."""

from __future__ import annotations

import json
from collections import Counter
from typing import TypeVar

from django.db import transaction
from django.utils import timezone

from checkpoints.blobstore import BlobCorrupted, BlobMissing, batched, blob_store
from checkpoints.history import chunk_prev, history_heads
from checkpoints.models import BlobRef, Checkpoint, GraphWorkspace
from checkpoints.payload import checkpoint_base_key
from checkpoints.services import CheckpointCorrupted, checkpoint_decode
from checkpoints.snapshots import snapshot_delta_files

# Blobs form a tree: a checkpoint (or graph workspace) names a snapshot root, a root lists
# manifest chunks, a chunk lists file bodies. BlobRef counts, per blob, the holders one level
# up: a root's count is its checkpoints and graph workspaces, a chunk's the live roots (count
# > 0) listing it, a file body's the live chunks listing it and the checkpoints whose snapshot
# lists it beside its root (a `delta`, checkpoints.snapshots.capture). A checkpoint whose payload is
# compressed against a base (checkpoints.services) also counts that base ("b", a leaf). An
# SDK agent's history chunk ("h", checkpoints.history) counts the checkpoints naming it as a
# chain's head and the live chunks naming it as the one before them.
# A blob going live or dead moves
# the counts of what it lists, so the collection reads only blobs whose count fell to 0, never
# the checkpoints. Counts are kept by retention alone (the sweep runs it one at a time): every
# run counts the checkpoints written since (`blobs_counted`, a partial index), thinning
# uncounts what it deletes. A task deleted outright leaves its counts: its blobs are kept (the
# safe side). Shared directories' snapshots (BLOB_REFERRERS, few; retention.collection) are not
# counted: their blobs are excluded from each collection.

COUNT_BATCH = 500
# Holders counted per run at most; a backlog (the first run on an existing database) is
# worked off over the following runs, and holds the collection back until it is.
MAX_COUNT_PER_RUN = 5_000
_CHILD = {"r": "c", "c": "f", "h": "h"}
# Every kind of count (a blob may be live as any of them).
KINDS = "rcfbh"


def blobs_held(row: Checkpoint | GraphWorkspace) -> tuple[str | None, list[str], list[str]]:
    """(the snapshot root, the history chain heads, the file bodies its snapshot lists beside
    its root: `delta`) a checkpoint or graph workspace names."""
    if isinstance(row, GraphWorkspace):
        snapshot, heads = row.snapshot, []
    else:
        try:
            loaded = checkpoint_decode(row)
        except CheckpointCorrupted:
            return None, [], []
        snapshot, heads = loaded.snapshot, list(history_heads(loaded.state.sdk))
    root = snapshot.get("root") if isinstance(snapshot, dict) else None
    return root, heads, snapshot_delta_files(snapshot)


def payload_base(row: Checkpoint | GraphWorkspace) -> str | None:
    """The blob a checkpoint's payload is compressed against, if any."""
    return checkpoint_base_key(row.payload) if isinstance(row, Checkpoint) else None


def _listed(digests: set[str], kind: str) -> dict[str, list[str]]:
    """What each root lists (its chunks) or each chunk lists (its file bodies). A blob the
    store cannot produce lists nothing, the same when it is counted and when uncounted."""
    store = blob_store()
    bodies: dict[str, bytes] = {}
    for batch in batched(sorted(digests)):
        try:
            bodies |= store.get_many(batch)
        except (BlobMissing, BlobCorrupted):
            for digest in batch:
                try:
                    bodies[digest] = store.get(digest)
                except (BlobMissing, BlobCorrupted):
                    continue
    out: dict[str, list[str]] = {}
    for digest in digests:
        if kind == "h":
            out[digest] = chunk_prev(bodies[digest]) if digest in bodies else []
            continue
        try:
            body = json.loads(bodies[digest])
            out[digest] = body["chunks"] if kind == "r" else [entry[1] for entry in body]
        except (KeyError, TypeError, IndexError, ValueError):
            out[digest] = []
    return out


def blob_refs_add(kind: str, deltas: Counter[str] | dict[str, int]) -> None:
    """Add to the counts of these blobs of one kind ("r", "c", "f", "b", "h"); a blob going live
    (0 -> more) or dead (more -> 0) adds to or takes from the counts of what it lists (level by
    level: a history chain is as long as its run)."""
    moves: Counter[str] | dict[str, int] | None = deltas
    current: str | None = kind
    while current is not None and moves is not None:
        moves = _refs_add_level(current, moves)
        current = _CHILD.get(current)


def _refs_add_level(kind: str, deltas: Counter[str] | dict[str, int]) -> Counter[str] | None:
    """One level of blob_refs_add: -> the moves of the counts of what these blobs list."""
    deltas = {digest: delta for digest, delta in deltas.items() if delta}
    if not deltas:
        return None
    now = timezone.now()
    born: set[str] = set()
    died: set[str] = set()
    for batch in batched(sorted(deltas)):
        keys = {f"{kind}:{digest}": digest for digest in batch}
        rows = {row.key: row for row in BlobRef.objects.filter(key__in=list(keys))}
        new, changed = [], []
        for key, digest in keys.items():
            row = rows.get(key)
            before = row.refs if row else 0
            after = max(before + deltas[digest], 0)
            if before <= 0 < after:
                born.add(digest)
            elif after <= 0 < before:
                died.add(digest)
            if after > 0:
                zero_since = None
            elif before > 0 or row is None:
                zero_since = now  # dead from now on
            else:
                zero_since = row.zero_since  # dead since then
            if row is None:
                new.append(BlobRef(key=key, refs=after, zero_since=zero_since))
            else:
                row.refs, row.zero_since = after, zero_since
                changed.append(row)
        BlobRef.objects.bulk_create(new)
        BlobRef.objects.bulk_update(changed, ["refs", "zero_since"])
    if not _CHILD.get(kind) or not (born or died):
        return None
    listed = _listed(born | died, kind)
    moves: Counter[str] = Counter()
    for digest in born:
        moves.update(listed[digest])
    for digest in died:
        moves.subtract(listed[digest])
    return moves


Counted = TypeVar("Counted", Checkpoint, GraphWorkspace)


def _count_batch(model: type[Counted]) -> int:
    """Count the snapshots of one batch of `model`'s rows not counted yet; -> the rows (0:
    none was left)."""
    with transaction.atomic():
        rows = list(
            model.objects.select_for_update(skip_locked=True)
            .filter(blobs_counted=False)
            .order_by("created_at")[:COUNT_BATCH]
        )
        if not rows:
            return 0
        model.objects.filter(pk__in=[row.pk for row in rows]).update(blobs_counted=True)
        held = [blobs_held(row) for row in rows]
        blob_refs_add("r", Counter(root for root, _heads, _files in held if root))
        blob_refs_add("f", Counter(f for _root, _heads, files in held for f in files))
        blob_refs_add("b", Counter(b for b in map(payload_base, rows) if b))
        blob_refs_add("h", Counter(head for _root, heads, _files in held for head in heads))
    return len(rows)


def _count_kind(model: type[Counted], counted: int, limit: int) -> int:
    """Count `model`'s rows batch by batch until none is left or `counted` reaches `limit`."""
    while counted < limit:
        batch = _count_batch(model)
        if not batch:
            break
        counted += batch
    return counted


def blobs_count(*, limit: int = MAX_COUNT_PER_RUN) -> bool:
    """Count the snapshots of the checkpoints and graph workspaces written since the last
    count, at most `limit`; -> True when none is left uncounted."""
    counted = _count_kind(Checkpoint, 0, limit)
    counted = _count_kind(GraphWorkspace, counted, limit)
    return not (
        Checkpoint.objects.filter(blobs_counted=False).exists()
        or GraphWorkspace.objects.filter(blobs_counted=False).exists()
    )
