"""Checkpoint services: writing checkpoints and loading them with checksum verification.

A checkpoint's payload is its canonical JSON, zlib-compressed, in one of two forms:

- plain: `zlib.compress(raw)` (every checkpoint before payload bases, and those written
  without a `CheckpointCodec`: recovery forks, the SDK runners);
- against a base: `b"B" + <the base's sha256, 32 bytes> + deflate(raw, zdict=base)`, where the base
  is the canonical JSON of an earlier checkpoint of the same run, stored once as a
  content-addressed blob (`checkpoints.blobstore`). Consecutive checkpoints of a run differ by
  a message or two, so one compressed against a recent one stores a few hundred bytes instead
  of the whole state (`CheckpointCodec` picks and rotates the base).

Both decode with `checkpoint_decode`, which verifies the sha256 of the uncompressed bytes
either way: a wrong or damaged base cannot produce a checkpoint that passes. A base the blob
store cannot produce makes the checkpoint corrupted (the loaders then fall back to an older
one). Retention counts the bases as it counts snapshot roots (`checkpoints.retention`).
"""

from __future__ import annotations

import json
import threading
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from checkpoints.blobstore import BlobCorrupted, BlobMissing, blob_key, blob_store
from checkpoints.models import Checkpoint, GraphWorkspace
from tasks.agent_state import SCHEMA_VERSION, AgentState
from tasks.canonical import canonical_bytes, sha256_hex
from tasks.events import EventType
from tasks.services import event_build, events_record, task_fenced_write


class CheckpointCorrupted(Exception):
    pass


class NoValidCheckpoint(Exception):
    pass


@dataclass(frozen=True)
class LoadedCheckpoint:
    checkpoint: Checkpoint
    state: AgentState
    snapshot: dict[str, Any] | None


# The first byte of a payload compressed against a base (a zlib stream starts with 0x78).
BASE_MARK = b"B"
_BASE_END = 1 + 32
# A run starts a new base when a checkpoint compressed against the current one exceeds this
# share of its uncompressed size (the state has drifted from it: its window of messages moved).
REBASE_SHARE = 1 / 16
BASE_CACHE_LIMIT = 32
_bases: OrderedDict[str, bytes] = OrderedDict()
_bases_lock = threading.Lock()


def _remember_base(key: str, raw: bytes) -> None:
    with _bases_lock:
        _bases[key] = raw
        _bases.move_to_end(key)
        while len(_bases) > BASE_CACHE_LIMIT:
            _bases.popitem(last=False)


def _deflate(raw: bytes, key: str, base: bytes) -> bytes:
    compressor = zlib.compressobj(1, zdict=base)
    return BASE_MARK + bytes.fromhex(key) + compressor.compress(raw) + compressor.flush()


class CheckpointCodec:
    """Compresses one run's checkpoints against a base: the canonical bytes of one of its
    earlier checkpoints, rotated when the state has drifted from it (REBASE_SHARE). A new
    base is a blob to store with the write of the checkpoints that use it (`take_bases`); a
    write that fails `forget`s it, so the next checkpoint starts a base of its own."""

    def __init__(self) -> None:
        self.base: tuple[str, bytes] | None = None
        self.unstored: dict[str, bytes] = {}

    def encode(self, raw: bytes) -> bytes:
        if self.base is not None:
            payload = _deflate(raw, *self.base)
            if len(payload) - _BASE_END <= len(raw) * REBASE_SHARE:
                return payload
        key = blob_key(raw)
        self.base = (key, raw)
        self.unstored[key] = raw
        _remember_base(key, raw)
        return _deflate(raw, key, raw)

    def take_bases(self) -> dict[str, bytes]:
        """{key: content} of the bases not stored yet; the caller stores them with the
        checkpoints that name them."""
        bases, self.unstored = self.unstored, {}
        return bases

    def forget(self) -> None:
        self.base = None
        self.unstored = {}


def checkpoint_base_key(payload: bytes | memoryview) -> str | None:
    """The blob key of the base a payload was compressed against (None: plain zlib)."""
    head = bytes(payload[:_BASE_END])
    if head[:1] != BASE_MARK or len(head) != _BASE_END:
        return None
    return head[1:].hex()


def _base_bytes(key: str) -> bytes:
    with _bases_lock:
        cached = _bases.get(key)
    if cached is not None:
        return cached
    raw = blob_store().get(key)  # verified against its key
    _remember_base(key, raw)
    return raw


def checkpoint_raw(payload: bytes | memoryview) -> bytes:
    """The canonical bytes of a payload (either form); raises zlib.error, BlobMissing,
    BlobCorrupted or ValueError when they cannot be produced."""
    data = bytes(payload)
    key = checkpoint_base_key(data)
    if key is None:
        return zlib.decompress(data)
    decompressor = zlib.decompressobj(zdict=_base_bytes(key))
    raw = decompressor.decompress(data[_BASE_END:]) + decompressor.flush()
    if not decompressor.eof:
        raise zlib.error("truncated payload")
    return raw


def checkpoint_encode(
    *, state: AgentState, snapshot: dict[str, Any] | None, codec: CheckpointCodec | None = None
) -> tuple[bytes, str, int]:
    """-> (compressed payload, sha256 of the canonical bytes, canonical size); with a
    `codec`, compressed against the run's base."""
    raw = canonical_bytes({"state": state.model_dump(mode="json"), "snapshot": snapshot})
    payload = zlib.compress(raw, 1) if codec is None else codec.encode(raw)
    return payload, sha256_hex(raw), len(raw)


def checkpoint_build(
    *,
    task_id: Any,
    seq: int,
    state: AgentState,
    level: str,
    trigger: str,
    snapshot: dict[str, Any] | None = None,
    parent_id: Any = None,
    codec: CheckpointCodec | None = None,
    versions: dict[str, Any] | None = None,
) -> Checkpoint:
    """An unsaved checkpoint; the caller inserts it inside its own (fenced) transaction (with
    the `codec`'s new bases, `CheckpointCodec.take_bases`). `versions`: the code it was made
    with (agent.versions)."""
    payload, checksum, size = checkpoint_encode(state=state, snapshot=snapshot, codec=codec)
    return Checkpoint(
        task_id=task_id,
        seq=seq,
        parent_id=parent_id,
        level=level,
        trigger=trigger,
        step_index=state.step_index,
        schema_version=SCHEMA_VERSION,
        payload=payload,
        checksum=checksum,
        size_bytes=size,
        created_at=timezone.now(),
        versions=versions or {},
    )


def checkpoint_decode(checkpoint: Checkpoint) -> LoadedCheckpoint:
    """Verify the checksum and parse the payload; raises CheckpointCorrupted."""
    try:
        raw = checkpoint_raw(checkpoint.payload)
    except (zlib.error, BlobMissing, BlobCorrupted, ValueError) as exc:
        raise CheckpointCorrupted(
            f"checkpoint {checkpoint.id}: payload unreadable ({exc})"
        ) from None
    if sha256_hex(raw) != checkpoint.checksum:
        raise CheckpointCorrupted(
            f"checkpoint {checkpoint.id} (seq {checkpoint.seq}): checksum mismatch"
        )
    try:
        data = json.loads(raw)
        state = AgentState.model_validate(data["state"])
    except (ValueError, KeyError, TypeError) as exc:
        raise CheckpointCorrupted(f"checkpoint {checkpoint.id}: invalid payload ({exc})") from None
    return LoadedCheckpoint(checkpoint=checkpoint, state=state, snapshot=data.get("snapshot"))


def checkpoint_verify(checkpoint: Checkpoint) -> bool:
    try:
        checkpoint_decode(checkpoint)
    except CheckpointCorrupted:
        return False
    return True


def checkpoint_find_latest_valid(
    *,
    task_id: Any,
    head_id: Any = None,
) -> tuple[LoadedCheckpoint | None, list[tuple[Checkpoint, CheckpointCorrupted]]]:
    """Read-only: (the head if it verifies, else the newest valid non-superseded checkpoint,
    and the corrupted checkpoints skipped on the way). The head alone is read first: a resume
    (after every review) reads one checkpoint, not all of a long task's."""
    skipped: list[tuple[Checkpoint, CheckpointCorrupted]] = []
    head = Checkpoint.objects.filter(id=head_id).first() if head_id is not None else None
    if head is not None:
        try:
            return checkpoint_decode(head), skipped
        except CheckpointCorrupted as exc:
            skipped.append((head, exc))
    candidates = [
        checkpoint
        for checkpoint in Checkpoint.objects.filter(task_id=task_id, superseded=False).order_by(
            "-seq"
        )
        if head is None or checkpoint.id != head.id
    ]
    for checkpoint in candidates:
        try:
            return checkpoint_decode(checkpoint), skipped
        except CheckpointCorrupted as exc:
            skipped.append((checkpoint, exc))
    return None, skipped


def checkpoint_load_latest_valid(
    *, task_id: Any, head_id: Any = None, epoch: int | None = None
) -> LoadedCheckpoint | None:
    """The head checkpoint if it verifies; otherwise the newest valid non-superseded one,
    recording a `checkpoint_corrupted` event for every checkpoint skipped. None when the task
    has no checkpoint yet; NoValidCheckpoint when it has some but none verifies.

    A worker passes its lease `epoch`: the events are then written only while it holds the
    lease (`task_fenced_write`; LeaseLost, writing nothing, when it does not)."""
    loaded, skipped = checkpoint_find_latest_valid(task_id=task_id, head_id=head_id)
    events = [
        event_build(
            task_id=task_id,
            type=EventType.CHECKPOINT_CORRUPTED,
            payload={"checkpoint_id": str(checkpoint.id), "seq": checkpoint.seq, "error": str(exc)},
            step_index=checkpoint.step_index,
        )
        for checkpoint, exc in skipped
    ]
    if events and epoch is not None:
        task_fenced_write(task_id=task_id, epoch=epoch, inserts=events)
    elif events:
        events_record(events)
    if loaded is None and skipped:
        raise NoValidCheckpoint(f"task {task_id}: no checkpoint passes checksum verification")
    return loaded


def checkpoint_next_seq(*, task_id: Any) -> int:
    last = (
        Checkpoint.objects.filter(task_id=task_id)
        .order_by("-seq")
        .values_list("seq", flat=True)
        .first()
    )
    return (last or 0) + 1


def checkpoint_fork_insert(*, checkpoint: Checkpoint, base_seq: int) -> int:
    """Insert a recovery's fork (`checkpoint_build`, its parent the base at `base_seq`) and mark
    the task's checkpoints between the base and the fork superseded (kept, never deleted).
    Inside the recovery's transaction, task row locked. -> how many were superseded."""
    checkpoint.save(force_insert=True)
    return Checkpoint.objects.filter(
        task_id=checkpoint.task_id,
        seq__gt=base_seq,
        seq__lt=checkpoint.seq,
        superseded=False,
    ).update(superseded=True)


def graph_workspace_build(
    *, task_id: Any, checkpoint_id: str, snapshot: dict[str, Any]
) -> GraphWorkspace:
    """An unsaved workspace snapshot of a graph checkpoint; the graph runner inserts it with
    the super-step's lease-fenced write."""
    return GraphWorkspace(
        task_id=task_id, checkpoint_id=checkpoint_id, snapshot=snapshot, created_at=timezone.now()
    )
