"""Read-side queries for checkpoints: lookups, what the timeline plots, the rollback preview,
the recovery plan that `auto` follows, and the diff of two checkpoints. Nothing here writes."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q, QuerySet

from checkpoints.blobstore import BlobCorrupted, BlobMissing, blob_store
from checkpoints.models import Checkpoint, GraphCheckpoint
from checkpoints.services import (
    CheckpointCorrupted,
    LoadedCheckpoint,
    checkpoint_decode,
    checkpoint_find_latest_valid,
)
from checkpoints.snapshots import (
    Manifest,
    RestoreResult,
    snapshot_manifest,
    snapshot_restore_plan,
)
from tasks.agent_state import Message
from tasks.errors import NotFound
from tasks.models import Task, ToolCall, ToolCallStatus
from tasks.selectors import as_text, task_tool
from tasks.spec import TaskSpec, spec_agent_kind
from tasks.states import TaskStatus
from tasks.tools.registry import ToolSpec

# Ledger statuses of calls that actually ran (or may have: running / unknown_outcome; a call
# waiting to be retried ran at least once).
EXECUTED = (
    ToolCallStatus.SUCCEEDED,
    ToolCallStatus.FAILED,
    ToolCallStatus.TIMED_OUT,
    ToolCallStatus.RUNNING,
    ToolCallStatus.UNKNOWN_OUTCOME,
    ToolCallStatus.RETRY_WAIT,
)
RETRYABLE = (ToolCallStatus.FAILED, ToolCallStatus.TIMED_OUT)
TEXT_DIFF_MAX_BYTES = 256 * 1024


def checkpoint_get(*, task: Task, checkpoint_id: Any) -> Checkpoint:
    """One of the task's checkpoints; `NotFound` for an unknown or malformed id."""
    try:
        return Checkpoint.objects.get(task=task, id=checkpoint_id)
    except (Checkpoint.DoesNotExist, ValueError, TypeError):
        raise NotFound("checkpoint not found") from None
    except Exception as exc:  # a malformed UUID raises ValidationError from the field
        if exc.__class__.__name__ == "ValidationError":
            raise NotFound("checkpoint not found") from None
        raise


def task_checkpoint_marks(*, task_id: Any) -> list[dict[str, Any]]:
    """The task's checkpoints (by seq) without their payloads, the time as ISO text in `at`:
    what the timeline plots."""
    return list(
        Checkpoint.objects.filter(task_id=task_id)
        .order_by("seq")
        .values(
            "id", "seq", "level", "trigger", "step_index", "superseded", at=as_text("created_at")
        )
    )


def checkpoint_supersession_marks(*, task_ids: list[Any]) -> dict[Any, list[dict[str, Any]]]:
    """Each task's checkpoints (by seq) as {seq, superseded, at (datetime)}: enough to tell
    which of its time was abandoned by a rollback (tasks.charts.superseded_ranges)."""
    marks: dict[Any, list[dict[str, Any]]] = {task_id: [] for task_id in task_ids}
    rows = (
        Checkpoint.objects.filter(task_id__in=task_ids)
        .order_by("task_id", "seq")
        .values("task_id", "seq", "superseded", "created_at")
    )
    for row in rows:
        marks[row["task_id"]].append(
            {"seq": row["seq"], "superseded": row["superseded"], "at": row["created_at"]}
        )
    return marks


def task_checkpoints(*, task_id: Any) -> QuerySet[Checkpoint]:
    """The task's checkpoints by seq (payloads deferred until a page of them is verified)."""
    return Checkpoint.objects.filter(task_id=task_id).order_by("seq")


def tool_or_none(name: str, *, task_id: Any) -> ToolSpec | None:
    return task_tool(task_id=task_id, name=name)


def tool_is_irreversible(name: str, *, task_id: Any) -> bool:
    """A side effect outside the workspace, which restoring files cannot undo: external
    tools, and non-idempotent tools that do not (only) write the workspace. An MCP tool's
    effects are outside unless it declares `openWorldHint: false` (a stdio server working on
    the workspace)."""
    tool = tool_or_none(name, task_id=task_id)
    if tool is None or not tool.side_effect:
        return False
    if tool.server:
        return (tool.annotations or {}).get("openWorldHint", True) is not False
    return tool.risk == "external" or (
        not tool.idempotent and tool.risk not in ("write", "destructive")
    )


def calls_undone(task: Task, loaded: LoadedCheckpoint) -> list[ToolCall]:
    """Ledger rows of the calls a rollback to this checkpoint undoes: those that ran after it
    was taken, and those its state has still pending (a `before_write_operation` checkpoint
    is taken just before its call runs: going back to it undoes that call, which runs again
    under a fresh call_id). Calls already finished in its state are kept, whatever their
    timestamps."""
    checkpoint, state = loaded.checkpoint, loaded.state
    done = {m.call_id for m in state.messages if m.role == "tool" and m.call_id}
    pending = {c.call_id for c in state.pending[state.next_call :]}
    after = Q(created_at__gte=checkpoint.created_at) | Q(started_at__gte=checkpoint.created_at)
    return [
        row
        for row in ToolCall.objects.filter(
            after | Q(call_id__in=pending), task=task, status__in=EXECUTED
        ).order_by("id")
        if row.call_id not in done
    ]


# --- rollback preview -------------------------------------------------------------------------


@dataclass
class RollbackPlan:
    """What rolling back to a checkpoint does: the files, links and folders the restore
    writes back and removes, and the calls it undoes. The preview shows it and the rollback
    (checkpoints.recovery) acts on it: one computation for both."""

    files: RestoreResult
    # "disk": the workspace as it is on this machine; otherwise there is none here and the
    # restore writes every file of the snapshot.
    workspace_source: str
    calls_undone: list[ToolCall]
    irreversible: list[ToolCall]
    superseded_seqs: list[int]


def rollback_plan(*, task: Task, loaded: LoadedCheckpoint) -> RollbackPlan:
    """The plan of a rollback to `loaded` (a decoded checkpoint of the task), computed without
    changing anything. Raises BlobMissing / BlobCorrupted when its snapshot cannot be read."""
    here = task.workspace_path.is_dir()
    files = snapshot_restore_plan(workspace=task.workspace_path, snapshot=loaded.snapshot)
    undone = calls_undone(task, loaded)
    return RollbackPlan(
        files=files,
        workspace_source="disk" if here else "no workspace on this machine: every file is written",
        calls_undone=undone,
        irreversible=[row for row in undone if tool_is_irreversible(row.tool, task_id=task.id)],
        superseded_seqs=list(
            Checkpoint.objects.filter(task=task, seq__gt=loaded.checkpoint.seq, superseded=False)
            .order_by("seq")
            .values_list("seq", flat=True)
        ),
    )


@dataclass
class RollbackPreview:
    task: Task
    checkpoint: Checkpoint
    checksum_ok: bool
    blocked: str = ""
    files_restore: list[str] = field(default_factory=list)
    files_delete: list[str] = field(default_factory=list)
    files_mode: list[str] = field(default_factory=list)
    links_delete: list[str] = field(default_factory=list)
    folders_delete: list[str] = field(default_factory=list)
    workspace_source: str = "disk"
    steps_undone: list[dict[str, Any]] = field(default_factory=list)
    calls_undone: list[dict[str, Any]] = field(default_factory=list)
    irreversible: list[dict[str, Any]] = field(default_factory=list)
    superseded_seqs: list[int] = field(default_factory=list)

    @property
    def allowed(self) -> bool:
        return not self.blocked

    def as_dict(self) -> dict[str, Any]:
        return {
            "task_id": str(self.task.id),
            "task_status": self.task.status,
            "checkpoint_id": str(self.checkpoint.id),
            "checkpoint_seq": self.checkpoint.seq,
            "checkpoint_name": self.checkpoint.name,
            "checksum_ok": self.checksum_ok,
            "allowed": self.allowed,
            "blocked": self.blocked,
            "files_restore": self.files_restore,
            "files_delete": self.files_delete,
            "files_mode": self.files_mode,
            "links_delete": self.links_delete,
            "folders_delete": self.folders_delete,
            "workspace_source": self.workspace_source,
            "steps_undone": self.steps_undone,
            "calls_undone": self.calls_undone,
            "irreversible": self.irreversible,
            "superseded_seqs": self.superseded_seqs,
        }


def recovery_blocked(task: Task) -> str:
    """Why no recovery operation may run on the task now ('' when one may)."""
    if task.status == TaskStatus.RUNNING:
        return "the task is running; cancel it or wait until it stops"
    if task.status == TaskStatus.QUEUED:
        return "the task is queued and a worker may take it at any moment"
    if task.status == TaskStatus.PENDING:
        return "the task has not started"
    return ""


def _call_dict(row: ToolCall) -> dict[str, Any]:
    return {
        "call_id": row.call_id,
        "tool": row.tool,
        "arguments": row.arguments,
        "status": row.status,
        "step_index": row.step_index,
    }


def rollback_preview(*, task: Task, checkpoint: Checkpoint) -> RollbackPreview:
    """What rolling back to `checkpoint` would do (its rollback_plan), computed without
    changing anything."""
    try:
        loaded = checkpoint_decode(checkpoint)
    except CheckpointCorrupted as exc:
        return RollbackPreview(
            task=task,
            checkpoint=checkpoint,
            checksum_ok=False,
            blocked=f"this checkpoint is corrupted ({exc})",
        )
    preview = RollbackPreview(
        task=task, checkpoint=checkpoint, checksum_ok=True, blocked=recovery_blocked(task)
    )
    try:
        plan = rollback_plan(task=task, loaded=loaded)
    except (BlobMissing, BlobCorrupted) as exc:
        preview.blocked = f"the snapshot cannot be read from the blob store ({exc})"
        return preview
    preview.files_restore = plan.files.written
    preview.files_delete = plan.files.deleted
    preview.files_mode = plan.files.modes
    preview.links_delete = plan.files.links
    preview.folders_delete = plan.files.folders
    preview.workspace_source = plan.workspace_source
    preview.calls_undone = [_call_dict(row) for row in plan.calls_undone]
    steps: dict[int, list[str]] = {}
    for row in plan.calls_undone:
        steps.setdefault(row.step_index, []).append(row.tool)
    preview.steps_undone = [{"step_index": s, "tools": tools} for s, tools in sorted(steps.items())]
    preview.irreversible = [
        {
            **_call_dict(row),
            "why": "external or non-idempotent: it happened outside the "
            "workspace and a rollback cannot undo it",
        }
        for row in plan.irreversible
    ]
    preview.superseded_seqs = plan.superseded_seqs
    return preview


# --- the plan `auto` follows ------------------------------------------------------------------


@dataclass(frozen=True)
class RecoveryPlan:
    strategy: str  # rollback | retry | forward
    why: str
    checkpoint_id: Any = None
    failed_call: str | None = None


def failed_call(task: Task, loaded: LoadedCheckpoint) -> ToolCall | None:
    """The failed (or interrupted) call of the step the checkpoint is in, or of the step it
    has just finished."""
    rows = ToolCall.objects.filter(
        task=task, status__in=(*RETRYABLE, ToolCallStatus.UNKNOWN_OUTCOME, ToolCallStatus.RUNNING)
    )
    state = loaded.state
    if state.phase == "tools":
        return rows.filter(call_id__in=[c.call_id for c in state.pending]).order_by("-id").first()
    return rows.filter(step_index=max(state.step_index - 1, 0)).order_by("-id").first()


def step_checkpoint(*, task: Task, step_index: int, before_seq: int) -> Checkpoint | None:
    """The step's `after_model` checkpoint: its tool calls are about to run."""
    return (
        Checkpoint.objects.filter(
            task=task,
            trigger="after_model",
            step_index=step_index,
            superseded=False,
            seq__lte=before_seq,
        )
        .order_by("-seq")
        .first()
    )


def step_start_checkpoint(*, task: Task, step_index: int, before_seq: int) -> Checkpoint | None:
    """The newest valid checkpoint at the start of a step (next is a model call)."""
    for cp in Checkpoint.objects.filter(
        task=task,
        step_index=step_index,
        seq__lte=before_seq,
        superseded=False,
        trigger__in=("after_step", "task_start", "rollback"),
    ).order_by("-seq"):
        try:
            if checkpoint_decode(cp).state.phase == "model":
                return cp
        except CheckpointCorrupted:
            continue
    return None


def recovery_plan(*, task: Task) -> RecoveryPlan:
    """What `auto` does: look at the failed call of the newest valid checkpoint's step; a batch
    already partly done goes forward (nothing done is redone); otherwise the call's tool
    decides — the task spec's `recovery` entry for it, else the tool's registry default
    (writes roll back, external calls retry, batch tools go forward)."""
    loaded, _ = checkpoint_find_latest_valid(task_id=task.id, head_id=task.head_checkpoint_id)
    if loaded is None:
        return RecoveryPlan("forward", "no valid checkpoint to recover from")
    row = failed_call(task, loaded)
    if row is None:
        return RecoveryPlan(
            "forward",
            "no failed tool call: continue from the newest valid checkpoint",
            checkpoint_id=loaded.checkpoint.id,
        )
    step = step_checkpoint(task=task, step_index=row.step_index, before_seq=loaded.checkpoint.seq)
    pending = loaded.state.pending
    if step is not None:
        try:
            pending = checkpoint_decode(step).state.pending
        except CheckpointCorrupted:
            pass
    done_in_batch = ToolCall.objects.filter(
        task=task,
        call_id__in=[c.call_id for c in pending if c.call_id != row.call_id],
        status=ToolCallStatus.SUCCEEDED,
    ).exists()
    if len(pending) > 1 and done_in_batch:
        return RecoveryPlan(
            "forward",
            "the failed call is part of a batch already partly "
            "done; continue it without redoing finished calls",
            checkpoint_id=loaded.checkpoint.id,
            failed_call=row.call_id,
        )
    spec = TaskSpec.model_validate(task.spec)
    strategy = spec.recovery.get(row.tool, "auto")
    source = f"the task's recovery setting for {row.tool}"
    if strategy == "auto":
        tool = tool_or_none(row.tool, task_id=task.id)
        strategy = tool.recovery if tool is not None else "forward"
        source = f"{row.tool}'s default"
    if strategy == "rollback":
        start = step_start_checkpoint(
            task=task, step_index=row.step_index, before_seq=loaded.checkpoint.seq
        )
        if start is not None:
            return RecoveryPlan(
                "rollback",
                f"{source} is rollback: undo step {row.step_index} and decide it again",
                checkpoint_id=start.id,
                failed_call=row.call_id,
            )
        strategy, source = "retry", f"{source} is rollback but the step has no start checkpoint"
    return RecoveryPlan(
        strategy,
        f"{source} is {strategy}",
        checkpoint_id=loaded.checkpoint.id,
        failed_call=row.call_id,
    )


# --- diff -------------------------------------------------------------------------------------


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


def checkpoint_diff(*, a: Checkpoint, b: Checkpoint) -> CheckpointDiff:
    """AgentState differences and the file manifest changes from `a` to `b`, with a unified
    diff for text files. Raises CheckpointCorrupted when either fails verification."""
    la, lb = checkpoint_decode(a), checkpoint_decode(b)
    sa = la.state.model_dump(mode="json", exclude={"messages"})
    sb = lb.state.model_dump(mode="json", exclude={"messages"})
    state_changes = [
        {"field": key, "a": sa.get(key), "b": sb.get(key)}
        for key in sorted(set(sa) | set(sb))
        if sa.get(key) != sb.get(key)
    ]
    ma, mb = la.state.messages, lb.state.messages
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


# --- LangGraph checkpoints of a graph task (checkpoints.langgraph) ---------------------------


def graph_checkpoints(*, task: Task) -> list[dict[str, Any]]:
    """The task's LangGraph checkpoints (root namespace), newest first, with LangGraph's
    metadata. `superseded`: not on the path from the newest checkpoint back to the first,
    i.e. left behind by a rollback's fork."""
    rows = list(
        GraphCheckpoint.objects.filter(thread_id=str(task.id), checkpoint_ns="")
        .order_by("-checkpoint_id")
        .values("checkpoint_id", "parent_checkpoint_id", "metadata")
    )
    parents = {row["checkpoint_id"]: row["parent_checkpoint_id"] for row in rows}
    on_path: set[str] = set()
    cursor = rows[0]["checkpoint_id"] if rows else ""
    while cursor and cursor not in on_path:
        on_path.add(cursor)
        cursor = parents.get(cursor, "")
    return [
        {
            "checkpoint_id": row["checkpoint_id"],
            "parent_checkpoint_id": row["parent_checkpoint_id"] or None,
            "step": row["metadata"].get("step"),
            "source": row["metadata"].get("source", ""),
            "parents": row["metadata"].get("parents") or {},
            "run_id": row["metadata"].get("run_id", ""),
            "head": index == 0,
            "superseded": row["checkpoint_id"] not in on_path,
        }
        for index, row in enumerate(rows)
    ]


def graph_task(task: Task) -> bool:
    """A LangGraph task (its state is its LangGraph thread). Other agent kinds (Pydantic AI)
    keep their state in the harness's own checkpoints."""
    return spec_agent_kind(task.spec) == "langgraph"


def checkpoint_recent_messages(*, checkpoint: Checkpoint | None, limit: int = 8) -> list[Message]:
    """The agent's last messages at a checkpoint (for a review: what the model had seen when it
    proposed the call). Empty when the checkpoint is gone or corrupt."""
    if checkpoint is None:
        return []
    try:
        state = checkpoint_decode(checkpoint).state
    except CheckpointCorrupted:
        return []
    return [m for m in state.messages if m.role != "system"][-limit:]
