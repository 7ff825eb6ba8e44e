"""The recorded run beside a replay, or two tasks of a family of forks, step by step."""

from __future__ import annotations

from typing import Any

from cases.models import CaseRun
from cases.selectors.recording import ledger_step, task_recording
from cases.selectors.verdict import replay_verdict
from checkpoints.files import FilesUnreadable, workspace_at
from checkpoints.selectors import file_changes
from checkpoints.snapshots import Manifest
from tasks.events import EventType
from tasks.models import Task, TaskEvent


def _divergence(task_id: Any) -> dict[str, Any] | None:
    event = (
        TaskEvent.objects.filter(task_id=task_id, type=EventType.REPLAY_DIVERGED)
        .order_by("id")
        .values("payload")
        .first()
    )
    return event["payload"] if event else None


# A reviewer's rejection replays as a failure (agent.runtime.replaying).
_SAME_AS = {"rejected": "failed"}


def _step_key(step: dict[str, Any] | None) -> Any:
    if step is None:
        return None
    return (
        [
            (c["tool"], c["args_hash"], _SAME_AS.get(c["status"], c["status"]))
            for c in step["calls"]
        ],
        step["final"],
    )


def _files_diff(recorded: dict[str, str], replay: dict[str, str]) -> list[dict[str, str]]:
    out = []
    for path in sorted(set(recorded) | set(replay)):
        a, b = recorded.get(path), replay.get(path)
        if a == b:
            continue
        change = "added" if a is None else "removed" if b is None else "changed"
        out.append({"path": path, "change": change})
    return out


def _steps_compare(
    recorded: dict[str, Any], replay: dict[str, Any], divergence: dict[str, Any] | None
) -> tuple[list[dict[str, Any]], int | None]:
    """Rows {turn, recorded, replay, same} and the first step that differs (a divergence
    event's step counts as differing)."""
    rec = {s["turn"]: s for s in recorded.get("steps", [])}
    rep = {s["turn"]: s for s in replay["steps"]}
    first: int | None = None
    rows = []
    for turn in range(1, max([0, *rec, *rep]) + 1):
        a, b = rec.get(turn), rep.get(turn)
        same = _step_key(a) == _step_key(b)
        if divergence is not None and divergence.get("turn") == turn:
            same = False
        if not same and first is None:
            first = turn
        rows.append({"turn": turn, "recorded": a, "replay": b, "same": same})
    if divergence is not None and first is None:
        first = divergence.get("turn")
    return rows, first


def _totals(recording: dict[str, Any]) -> dict[str, Any]:
    return {
        "steps": recording.get("steps_used"),
        "cost_usd": recording.get("cost_usd"),
        "seconds": recording.get("seconds"),
    }


def case_run_report(*, case_run: CaseRun) -> dict[str, Any]:
    """The recorded run beside the replay, step by step (decision text, calls and their
    outcomes, time, cost), the first divergent step, the final files' differences, the
    totals and the verdict. The page and the JSON are this."""
    case, task = case_run.case, case_run.task
    recorded = case.recording
    replay = task_recording(task=task)
    divergence = _divergence(task.id)
    rows, first = _steps_compare(recorded, replay, divergence)
    verdict = replay_verdict(
        case=case, task=task, replay=replay, divergence=divergence, first_divergent_step=first
    )
    return {
        "case": {"id": str(case.id), "name": case.name, "tags": case.tags},
        "run": {
            "id": str(case_run.id),
            "task_id": str(task.id),
            "model": case_run.model,
            "on_divergence": case_run.on_divergence,
            "status": task.status,
        },
        "passed": verdict["state"] == "passed",
        "state": verdict["state"],
        "failures": verdict["failures"],
        "first_divergent_step": first,
        "divergence": divergence,
        "steps": rows,
        "files": _files_diff(recorded.get("files", {}), replay["files"]),
        "totals": {"recorded": _totals(recorded), "replay": _totals(replay)},
    }


def tasks_compare(*, task: Task, other: Task) -> dict[str, Any]:
    """Two tasks side by side with the same report as a replay's (`recorded` is `task`,
    `replay` is `other`): a fork and its original, or two siblings. No verdict. The final
    files carry the diff of each changed file from `task`'s head to `other`'s."""
    a, b = task_recording(task=task), task_recording(task=other)
    # A fork's first turns are its original's (not in its own events): shown as they were.
    if other.fork_of_id == task.id:
        _inherit(fork=other, fork_rec=b, original_rec=a)
    elif task.fork_of_id == other.id:
        _inherit(fork=task, fork_rec=a, original_rec=b)
    rows, first = _steps_compare(a, b, None)
    return {
        "task_id": str(task.id),
        "other_id": str(other.id),
        "siblings": [str(t) for t in task_siblings(task=task)],
        "first_divergent_step": first,
        "steps": rows,
        "files": _heads_diff(task, other),
        "totals": {"recorded": _totals(a), "replay": _totals(b)},
    }


def _heads_diff(task: Task, other: Task) -> list[dict[str, Any]]:
    """Each file that differs between the two heads: {path, change, before, after, text_diff}
    (the checkpoints' file diff; `text_diff` is the unified diff of a text file)."""
    manifests = []
    for t in (task, other):
        try:
            manifests.append(workspace_at(task=t).manifest)
        except FilesUnreadable:
            manifests.append(Manifest())
    before, after = manifests
    paths = sorted(set(before) | set(after))
    return [f.__dict__ for f in file_changes(before=before, after=after, paths=paths)]


def _inherit(*, fork: Task, fork_rec: dict[str, Any], original_rec: dict[str, Any]) -> None:
    """The original's turns the fork started from, then the turn whose calls were pending at
    the fork (the original's decision, the calls as the fork ran them, each edited argument
    set marked with the original's as `edited_from`), then the fork's own."""
    turns = _inherited_turns(fork)
    steps = [s for s in original_rec["steps"] if s["turn"] <= turns]
    resumed = turns + 1
    decision = next((d for d in original_rec["decisions"] if d["turn"] == resumed), None)
    if decision and decision.get("calls") and all(s["turn"] != resumed for s in fork_rec["steps"]):
        step = ledger_step(task=fork, decision=decision)
        theirs = next(s for s in original_rec["steps"] if s["turn"] == resumed)["calls"]
        for mine, was in zip(step["calls"], theirs, strict=True):
            if mine["args_hash"] != was["args_hash"]:
                mine["edited_from"] = was["args"]
        steps.append(step)
    fork_rec["steps"] = steps + fork_rec["steps"]


def _inherited_turns(fork: Task) -> int:
    payload = (
        TaskEvent.objects.filter(task_id=fork.id, type=EventType.FORK)
        .values_list("payload", flat=True)
        .first()
    )
    return int((payload or {}).get("inherited_turns") or 0)


def task_siblings(*, task: Task) -> list[Any]:
    """The task's family of forks, listed together: the original it was forked from (or
    itself) and every fork of it, oldest first."""
    root_id = task.fork_of_id or task.id
    return [
        root_id,
        *Task.objects.filter(fork_of_id=root_id)
        .order_by("created_at")
        .values_list("id", flat=True),
    ]
