"""The diff of two checkpoints: their AgentState and their files (text diffs of text files)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from checkpoints.blobstore import blob_store
from checkpoints.models import Checkpoint
from checkpoints.selectors.lookups import state_messages
from checkpoints.services import checkpoint_decode
from checkpoints.snapshots import Manifest, snapshot_manifest
from tasks.agent_state import AgentState

TEXT_DIFF_MAX_BYTES = 256 * 1024


@dataclass
class FileDiff:
    path: str
    change: str  # added | removed | changed | mode
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    text_diff: str = ""


@dataclass
class CheckpointDiff:
    a: Checkpoint
    b: Checkpoint
    state_changes: list[dict[str, Any]]
    messages_common: int
    messages_only_a: list[dict[str, Any]]
    messages_only_b: list[dict[str, Any]]
    files: list[FileDiff]

    def as_dict(self) -> dict[str, Any]:
        return {
            "a": {"id": str(self.a.id), "seq": self.a.seq, "name": self.a.name},
            "b": {"id": str(self.b.id), "seq": self.b.seq, "name": self.b.name},
            "state": self.state_changes,
            "messages": {
                "common": self.messages_common,
                "only_a": self.messages_only_a,
                "only_b": self.messages_only_b,
            },
            "files": [f.__dict__ for f in self.files],
        }


def _text(body: bytes) -> list[str] | None:
    if len(body) > TEXT_DIFF_MAX_BYTES or b"\x00" in body:
        return None
    try:
        return body.decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        return None


def _file_text_diff(item: FileDiff, bodies: dict[str, bytes]) -> None:
    """Set `item.text_diff`: the unified diff of its two sides (`bodies` holds the contents of
    the sides that are at most TEXT_DIFF_MAX_BYTES), or why there is none."""
    if item.change == "mode":
        return

    def lines(side: dict[str, Any] | None) -> list[str] | None:
        if side is None:
            return []
        body = bodies.get(side["hash"])
        return None if body is None else _text(body)

    old, new = lines(item.before), lines(item.after)
    if old is None or new is None:
        item.text_diff = "(binary or large file: no text diff)"
        return
    item.text_diff = "".join(
        difflib.unified_diff(
            old,
            new,
            fromfile=f"a/{item.path}" if item.before else "/dev/null",
            tofile=f"b/{item.path}" if item.after else "/dev/null",
        )
    )


def entry_dict(entry: Any) -> dict[str, Any] | None:
    if entry is None:
        return None
    return {"hash": entry.hash, "size": entry.size, "mode": oct(entry.mode)}


def file_changes(*, before: Manifest, after: Manifest, paths: Iterable[str]) -> list[FileDiff]:
    """How each of `paths` changed from manifest `before` to `after` (unchanged ones are left
    out), with unified diffs of text files: the checkpoint diff (every path) and the file
    browser's diff of one file."""
    files: list[FileDiff] = []
    for path in paths:
        old, new = before.get(path), after.get(path)
        if old == new:
            continue
        if old is None:
            change = "added"
        elif new is None:
            change = "removed"
        else:
            change = "mode" if old.hash == new.hash else "changed"
        files.append(FileDiff(path, change, entry_dict(old), entry_dict(new)))
    wanted = {
        side["hash"]
        for f in files
        if f.change != "mode"
        for side in (f.before, f.after)
        if side is not None and side["size"] <= TEXT_DIFF_MAX_BYTES
    }
    bodies = blob_store().get_many(wanted) if wanted else {}
    for item in files:
        _file_text_diff(item, bodies)
    return files


def _message_dict(m: Any) -> dict[str, Any]:
    out = {"role": m.role, "content": m.content[:500]}
    if m.calls:
        out["calls"] = [{"call_id": c.call_id, "tool": c.tool, "args": c.args} for c in m.calls]
    if m.call_id:
        out["call_id"] = m.call_id
    return out


# The SDK state's keys that hold its history (agent.pydantic_ai_runner, agent.openai_agents_runner):
# compared as messages, not as JSON.
SDK_HISTORY_KEYS = ("messages", "run_state")


def _state_fields(state: AgentState) -> dict[str, Any]:
    fields = state.model_dump(mode="json", exclude={"messages"})
    if isinstance(fields.get("sdk"), dict):
        fields["sdk"] = {k: v for k, v in fields["sdk"].items() if k not in SDK_HISTORY_KEYS}
    return fields


def checkpoint_diff(*, a: Checkpoint, b: Checkpoint) -> CheckpointDiff:
    """AgentState differences and the file manifest changes from `a` to `b`, with a unified
    diff for text files. Raises CheckpointCorrupted when either fails verification."""
    la, lb = checkpoint_decode(a), checkpoint_decode(b)
    sa, sb = _state_fields(la.state), _state_fields(lb.state)
    state_changes = [
        {"field": key, "a": sa.get(key), "b": sb.get(key)}
        for key in sorted(set(sa) | set(sb))
        if sa.get(key) != sb.get(key)
    ]
    ma, mb = state_messages(la.state), state_messages(lb.state)
    common = 0
    while common < min(len(ma), len(mb)) and ma[common] == mb[common]:
        common += 1
    fa, fb = snapshot_manifest(la.snapshot), snapshot_manifest(lb.snapshot)
    files = file_changes(before=fa, after=fb, paths=sorted(set(fa) | set(fb)))
    return CheckpointDiff(
        a=a,
        b=b,
        state_changes=state_changes,
        messages_common=common,
        messages_only_a=[_message_dict(m) for m in ma[common:]],
        messages_only_b=[_message_dict(m) for m in mb[common:]],
        files=files,
    )
