"""Checkpoint services: writing checkpoints and loading them with checksum verification.

A checkpoint's payload is its canonical JSON in one of three forms (checkpoints.payload: plain
zlib, compressed against a base blob, or another checkpoint's); `checkpoint_decode` verifies the
sha256 of the canonical bytes whatever the form.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from checkpoints.blobstore import BlobCorrupted, BlobMissing
from checkpoints.models import Checkpoint, GraphWorkspace
from checkpoints.payload import SAME_MARK, checkpoint_raw, checkpoint_same_as

# The codec and the payload forms live in checkpoints.payload (re-exported for those callers
# that import them from here).
from checkpoints.payload import CheckpointCodec as CheckpointCodec
from checkpoints.payload import checkpoint_base_key as checkpoint_base_key
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


def checkpoint_dedupe(checkpoint: Checkpoint, staged: list[Checkpoint]) -> None:
    """Store `checkpoint` as the last of `staged` (unwritten, to be inserted in the same write)
    when their canonical bytes are the same."""
    last = staged[-1] if staged else None
    if last is not None and last.checksum == checkpoint.checksum:
        if checkpoint_same_as(last.payload) is None and last.task_id == checkpoint.task_id:
            checkpoint.payload = SAME_MARK + last.id.bytes


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
    payload: bytes | memoryview = checkpoint.payload
    if (source := checkpoint_same_as(payload)) is not None:
        read_ahead = checkpoint.source_payload
        if read_ahead is None:
            rows = Checkpoint.objects.filter(id=source, task_id=checkpoint.task_id)
            read_ahead = rows.values_list("payload", flat=True).first() or b""
        payload = read_ahead
        if checkpoint_same_as(payload) is not None:
            payload = b""  # one step only: a source is never a reference itself
    try:
        raw = checkpoint_raw(payload)
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


def checkpoints_with_sources(checkpoints: Iterable[Checkpoint]) -> list[Checkpoint]:
    """The checkpoints, each stored as another's payload (`checkpoint_same_as`) given that
    payload (`source_payload`, read by checkpoint_decode): a list verifies in one query more,
    not one per such checkpoint."""
    rows = list(checkpoints)
    wanted = {source: row for row in rows if (source := checkpoint_same_as(row.payload))}
    if wanted:
        found = dict(Checkpoint.objects.filter(id__in=list(wanted)).values_list("id", "payload"))
        for row in rows:
            source = checkpoint_same_as(row.payload)
            if source is not None and source in found:
                row.source_payload = found[source]
    return rows


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
