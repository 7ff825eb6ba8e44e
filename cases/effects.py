"""What a recorded task's commands did to its workspace (issue #31), kept with the case.

A replay answers a matched `run_command` from the recording without running it, so the files
the command wrote would be missing from the replay's workspace: later calls would read other
files than recorded and the case's file checks would fail against unchanged code. The effect of
each successful command is the difference between the workspace at the checkpoint written just
before it ran (the intent of a side effect is durable first) and at the next checkpoint: files
written (content, mode), files removed, empty folders made. A replay re-applies it to its own
workspace (agent.runtime.replaying). Bounded: a case keeps at most MAX_EFFECT_BYTES of them."""

from __future__ import annotations

import base64
from typing import Any

from checkpoints.blobstore import BlobCorrupted, BlobMissing, blob_store
from checkpoints.models import Checkpoint
from checkpoints.services import CheckpointCorrupted, checkpoint_decode
from checkpoints.snapshots import Manifest, manifest_changes, snapshot_manifest
from review.standing import COMMAND_TOOL
from tasks.models import Task, ToolCall, ToolCallStatus

# The content a case keeps of its commands' effects, in all.
MAX_EFFECT_BYTES = 32 * 1024 * 1024
# The checkpoints a side effect's intent is written with (agent.runtime.call_execute.execute).
_BEFORE_TRIGGERS = ("before_write_operation", "before_external_call")


class EffectsUnreadable(Exception):
    """A command's effect could not be read back (a checkpoint or blob failed verification,
    or the effects are larger than a case keeps)."""


def _decoded(checkpoint: Checkpoint) -> Any:
    try:
        return checkpoint_decode(checkpoint)
    except CheckpointCorrupted as exc:
        raise EffectsUnreadable(f"checkpoint #{checkpoint.seq} cannot be read: {exc}") from None


def _manifest(checkpoint: Checkpoint, loaded: Any = None) -> Manifest:
    try:
        return snapshot_manifest((loaded or _decoded(checkpoint)).snapshot)
    except (BlobMissing, BlobCorrupted) as exc:
        raise EffectsUnreadable(f"checkpoint #{checkpoint.seq} cannot be read: {exc}") from None


def _difference(before: Manifest, after: Manifest, room: int) -> tuple[dict[str, Any], int]:
    """The effect turning `before` into `after` (checkpoints.snapshots.manifest_changes: the
    files written with their content and mode, those removed; and the empty folders made), and
    the room left of MAX_EFFECT_BYTES."""
    write, delete, modes = manifest_changes(before, after)
    store = blob_store()
    written: dict[str, dict[str, Any]] = {}
    for path in sorted([*write, *modes]):
        entry = after[path]
        room -= entry.size
        if room < 0:
            raise EffectsUnreadable(
                f"the commands' file effects exceed {MAX_EFFECT_BYTES // (1024 * 1024)} MiB"
            )
        try:
            body = store.get(entry.hash)
        except (BlobMissing, BlobCorrupted) as exc:
            raise EffectsUnreadable(f"{path}: {exc}") from None
        written[path] = {"b64": base64.b64encode(body).decode("ascii"), "mode": entry.mode}
    folders = sorted(after.folders - before.folders)
    return {"write": written, "delete": delete, "folders": folders}, room


def command_effects(*, task: Task) -> dict[str, dict[str, Any]]:
    """{call_id: effect} of the task's successful commands, on the branch it went on with
    (superseded checkpoints left out). An effect that changed nothing is left out too. Only a
    command's two checkpoints have their manifests read."""
    commands = set(
        ToolCall.objects.filter(
            task_id=task.id, tool=COMMAND_TOOL, status=ToolCallStatus.SUCCEEDED
        ).values_list("call_id", flat=True)
    )
    if not commands:
        return {}
    checkpoints = list(Checkpoint.objects.filter(task=task, superseded=False).order_by("seq"))
    effects: dict[str, dict[str, Any]] = {}
    room = MAX_EFFECT_BYTES
    for before, after in zip(checkpoints, checkpoints[1:], strict=False):
        if before.trigger not in _BEFORE_TRIGGERS:
            continue
        loaded = _decoded(before)
        state = loaded.state
        if not 0 <= state.next_call < len(state.pending):
            continue
        call = state.pending[state.next_call]
        if call.tool != COMMAND_TOOL or call.call_id not in commands or call.call_id in effects:
            continue
        effect, room = _difference(_manifest(before, loaded), _manifest(after), room)
        if effect["write"] or effect["delete"] or effect["folders"]:
            effects[call.call_id] = effect
    return effects
