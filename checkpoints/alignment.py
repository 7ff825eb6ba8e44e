"""Context alignment (DESIGN §3, §5): when a task resumes after a rollback, a retry or a
redispatch, the agent is told what happened before it continues — as structured JSON and a
short paragraph: the steps completed (names and key results), the files modified, what was
undone, the last failure, where to continue and what not to repeat.

`context_align` is called by the loop (`agent.runtime.start`) on every resume; it does nothing
unless the resume follows a recovery (a RecoveryNote in the state, left by
checkpoints.recovery) or a requeue from `stalled` (redispatch) or `retry_wait` (retry)."""

from __future__ import annotations

import json
from typing import Any

from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_decode
from checkpoints.snapshots import manifest_changes, snapshot_manifest
from tasks.agent_state import AgentState, Message
from tasks.events import EventType
from tasks.models import TaskEvent, ToolCall, ToolCallStatus

RESULT_CHARS = 160
MAX_STEPS = 20
MAX_FILES = 30
_REQUEUE_KIND = {"stalled": "redispatch", "retry_wait": "retry"}


def resume_kind(*, task_id: Any, state: AgentState) -> str | None:
    if state.recovery is not None:
        return state.recovery.kind
    last = (
        TaskEvent.objects.filter(task_id=task_id, type=EventType.STATUS, payload__to="queued")
        .order_by("-id")
        .values_list("payload", flat=True)
        .first()
    )
    previous = (last or {}).get("from")
    return _REQUEUE_KIND.get(previous) if isinstance(previous, str) else None


def brief(value: Any, limit: int = RESULT_CHARS) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _steps(task_id: Any, state: AgentState) -> list[dict[str, Any]]:
    results = {m.call_id: m.content for m in state.messages if m.role == "tool" and m.call_id}
    proposed = [m for m in state.messages if m.role == "assistant" and m.calls]
    ids = [c.call_id for m in proposed for c in m.calls or []]
    status = dict(
        ToolCall.objects.filter(task_id=task_id, call_id__in=ids).values_list("call_id", "status")
    )
    steps = []
    for number, message in enumerate(proposed, start=1):
        calls = [
            {
                "call_id": c.call_id,
                "tool": c.tool,
                "args": brief(c.args, 100),
                "status": status.get(c.call_id, "not run"),
                "result": brief(results[c.call_id]) if c.call_id in results else None,
            }
            for c in message.calls or []
        ]
        steps.append({"step": number, "calls": calls})
    return steps[-MAX_STEPS:]


def _files_modified(
    task_id: Any, checkpoint: Checkpoint, snapshot: dict[str, Any] | None
) -> dict[str, Any]:
    first = Checkpoint.objects.filter(task_id=task_id).order_by("seq").first()
    if first is None or first.id == checkpoint.id:
        return {"added": [], "changed": [], "removed": []}
    initial = snapshot_manifest(checkpoint_decode(first).snapshot)
    now = snapshot_manifest(snapshot)
    write, delete, _ = manifest_changes(initial, now)
    return {
        "added": [p for p in write if p not in initial][:MAX_FILES],
        "changed": [p for p in write if p in initial][:MAX_FILES],
        "removed": delete[:MAX_FILES],
    }


def _last_failure(task_id: Any, state: AgentState, kind: str) -> dict[str, Any] | None:
    error = state.recovery.last_failure if state.recovery else None
    error = error or state.last_error
    if error is not None:
        return {"error_class": error.error_class, "message": brief(error.message, 300)}
    row = (
        ToolCall.objects.filter(
            task_id=task_id,
            status__in=(
                ToolCallStatus.FAILED,
                ToolCallStatus.TIMED_OUT,
                ToolCallStatus.UNKNOWN_OUTCOME,
            ),
        )
        .order_by("-id")
        .first()
    )
    if row is not None:
        return {
            "error_class": row.error_class or row.status,
            "message": brief(f"{row.tool} {row.call_id}: {row.error_message}", 300),
        }
    if kind == "redispatch":
        return {"error_class": "worker_lost", "message": "the previous worker stopped heartbeating"}
    return None


def alignment_summary(
    *,
    task_id: Any,
    state: AgentState,
    kind: str,
    checkpoint: Checkpoint,
    snapshot: dict[str, Any] | None,
    steps: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """`steps`: the steps completed, when the state's messages do not hold them (an SDK
    agent's history is the SDK's: agent.sdk_run.alignment reads them from the ledger)."""
    note = state.recovery
    steps = _steps(task_id, state) if steps is None else steps[-MAX_STEPS:]
    if state.phase == "tools":
        names = ", ".join(f"{c.tool} ({c.call_id})" for c in state.pending[state.next_call :])
        continue_at = (
            f"step {state.step_index + 1}: the pending call(s) {names} run next, "
            "then decide the next action"
        )
    else:
        continue_at = f"step {state.step_index + 1}: decide the next action"
    do_not_repeat = [
        f"{c['tool']} {c['args']} (step {s['step']}, done)"
        for s in steps
        for c in s["calls"]
        if c["status"] == "succeeded"
    ]
    if note is not None:
        do_not_repeat += [
            f"{item} (done before the {note.kind}, NOT undone)"
            for item in [*note.undone.get("irreversible", []), *note.undone.get("not_undone", [])]
        ]
    return {
        "kind": kind,
        "reason": note.reason if note else "",
        "by": note.actor if note else "harness",
        "resumed_from": {
            "checkpoint_seq": checkpoint.seq,
            "from_seq": note.from_seq if note else None,
            "step_index": state.step_index,
            "phase": state.phase,
        },
        "steps_completed": steps,
        "files_modified": _files_modified(task_id, checkpoint, snapshot),
        "undone": note.undone if note else {},
        "last_failure": _last_failure(task_id, state, kind),
        "continue_at": continue_at,
        "do_not_repeat": do_not_repeat[-MAX_STEPS:],
    }


_WHAT = {
    "rollback": "was rolled back",
    "retry": "is retrying its failed step",
    "forward": "continues from its newest valid checkpoint",
    "redispatch": "was moved to a new worker after the previous one stopped",
}


def alignment_text(summary: dict[str, Any]) -> str:
    who = f" by {summary['by']}" if summary["by"] != "harness" else ""
    reason = f" (reason: {summary['reason']})" if summary["reason"] else ""
    parts = [
        f"[harness] This task {_WHAT[summary['kind']]}{who}{reason}, resuming at "
        f"checkpoint #{summary['resumed_from']['checkpoint_seq']}."
    ]
    done = "; ".join(
        f"{s['step']}. " + ", ".join(f"{c['tool']} -> {c['status']}" for c in s["calls"])
        for s in summary["steps_completed"]
    )
    parts.append(f"Steps completed: {done or 'none'}.")
    files = summary["files_modified"]
    touched = (
        [f"{p} (added)" for p in files["added"]]
        + [f"{p} (changed)" for p in files["changed"]]
        + [f"{p} (removed)" for p in files["removed"]]
    )
    parts.append(f"Files modified since the start: {', '.join(touched) or 'none'}.")
    undone = summary["undone"]
    if undone.get("files_restored") or undone.get("files_deleted") or undone.get("calls"):
        parts.append(
            "Undone: "
            + "; ".join(
                filter(
                    None,
                    [
                        f"files restored {', '.join(undone.get('files_restored', [])[:10])}"
                        if undone.get("files_restored")
                        else "",
                        f"files deleted {', '.join(undone.get('files_deleted', [])[:10])}"
                        if undone.get("files_deleted")
                        else "",
                        f"calls {', '.join(undone.get('calls', [])[:10])}"
                        if undone.get("calls")
                        else "",
                    ],
                )
            )
            + "."
        )
    if undone.get("compensated"):
        parts.append(
            "Compensated (their effects outside the workspace were undone): "
            + "; ".join(undone["compensated"][:10])
            + "."
        )
    cannot = [*undone.get("irreversible", []), *undone.get("not_undone", [])]
    if cannot:
        parts.append(
            "Could not be undone (still in effect outside the workspace): "
            + "; ".join(cannot[:10])
            + "."
        )
    if undone.get("retried_calls"):
        parts.append(f"Calls that will run again: {', '.join(undone['retried_calls'])}.")
    failure = summary["last_failure"]
    if failure:
        parts.append(f"Last failure: {failure['error_class']}: {failure['message']}.")
    parts.append(f"Continue at {summary['continue_at']}.")
    if summary["do_not_repeat"]:
        parts.append("Do not repeat: " + "; ".join(summary["do_not_repeat"]) + ".")
    return " ".join(parts) + "\n\n" + json.dumps(summary, ensure_ascii=False, sort_keys=True)


def context_align(
    *, task_id: Any, state: AgentState, checkpoint: Checkpoint, snapshot: dict[str, Any] | None
) -> dict[str, Any] | None:
    """Inject the alignment message into `state` when this resume follows a recovery or a
    redispatch, clear the recovery note, and return the summary (None otherwise)."""
    kind = resume_kind(task_id=task_id, state=state)
    if kind is None:
        return None
    summary = alignment_summary(
        task_id=task_id, state=state, kind=kind, checkpoint=checkpoint, snapshot=snapshot
    )
    message = Message(role="user", content=alignment_text(summary))
    # Tool results must directly follow the assistant message that asked for them, so with
    # calls pending the note goes before that message.
    position = len(state.messages)
    if state.phase == "tools":
        for index in range(len(state.messages) - 1, -1, -1):
            if state.messages[index].role == "assistant" and state.messages[index].calls:
                position = index
                break
    state.messages.insert(position, message)
    state.recovery = None
    return summary
