"""Reads of cases and replays: a task's recording (what a case keeps), the replay setup the
runtime's tool oracle loads, a replay's verdict against the case's criteria and the step-by-step
comparison of the recorded run with a replay (issue #31)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from cases.criteria import CaseCriteria
from cases.models import Case, CaseRun
from checkpoints.blobstore import BlobCorrupted, BlobMissing, blob_store
from checkpoints.files import FilesUnreadable, workspace_at
from checkpoints.models import Checkpoint
from review.models import ReviewRequest
from tasks.canonical import canonical_hash
from tasks.errors import NotFound
from tasks.events import EventType
from tasks.models import Task, TaskEvent, ToolCall, ToolCallStatus
from tasks.selectors import model_decisions_by_turn, user_can_view
from tasks.states import TERMINAL

# What a recorded failure tells the model, as the ledger keeps it (agent.runtime.calls).
_OBSERVATION_CHARS = 4000


class CaseUnsavable(Exception):
    """A task that cannot become a case (still running, nothing recorded, unreadable files)."""


# --- access ---------------------------------------------------------------------------------


def access_case(user: AbstractBaseUser, case_id: Any) -> Case:
    """A case `user` may read (any role may; no role reads nothing). NotFound otherwise."""
    if not user_can_view(user):
        raise NotFound("case not found")
    try:
        return Case.objects.get(id=case_id)
    except (Case.DoesNotExist, ValueError, TypeError):
        raise NotFound("case not found") from None
    except Exception as exc:  # a malformed UUID raises ValidationError from the field
        if exc.__class__.__name__ == "ValidationError":
            raise NotFound("case not found") from None
        raise


def access_case_run(user: AbstractBaseUser, run_id: Any) -> CaseRun:
    if not user_can_view(user):
        raise NotFound("replay not found")
    try:
        return CaseRun.objects.select_related("case", "task").get(id=run_id)
    except (CaseRun.DoesNotExist, ValueError, TypeError):
        raise NotFound("replay not found") from None
    except Exception as exc:
        if exc.__class__.__name__ == "ValidationError":
            raise NotFound("replay not found") from None
        raise


def cases_list(*, tag: str | None = None) -> list[Case]:
    cases = list(Case.objects.all())
    if tag:
        # Tags are a short JSON list per case: filtered here, portable across databases.
        cases = [c for c in cases if tag in (c.tags or [])]
    return cases


def case_runs(*, case: Case, limit: int = 50) -> QuerySet[CaseRun]:
    return CaseRun.objects.filter(case=case).select_related("task")[:limit]


# --- a task's recording -----------------------------------------------------------------------


def _decisions(task_id: Any) -> list[dict[str, Any]]:
    """The model decisions the task went on with, in turn order."""
    turns = model_decisions_by_turn(task_id=task_id)
    return [turns[t] for t in sorted(turns)]


def _call_entry(turn: int, proposed: dict[str, Any], row: ToolCall | None, reviewed: bool):
    args = proposed.get("args") or {}
    entry: dict[str, Any] = {
        "turn": turn,
        "call_id": proposed.get("call_id", ""),
        "tool": proposed.get("tool", ""),
        "args": args,
        "args_hash": canonical_hash(args),
        "status": row.status if row is not None else "not_run",
        "error_class": row.error_class if row is not None else "",
        "error_message": (row.error_message if row is not None else "")[:2000],
        "reviewed": reviewed,
        "duration_ms": row.duration_ms if row is not None else None,
    }
    if row is not None and row.status == ToolCallStatus.SUCCEEDED:
        entry["result"] = row.result
    elif row is not None and isinstance(row.result, dict):
        entry["observation"] = str(row.result.get("observation") or "")[:_OBSERVATION_CHARS]
    return entry


def task_recording(*, task: Task) -> dict[str, Any]:
    """What the task did, step by step: each model decision, each call with its outcome as
    the ledger holds it, and the final answer, usage and final files. The same shape for a
    recorded task and for a replay, so the two compare field by field."""
    decisions = _decisions(task.id)
    rows = {row.call_id: row for row in ToolCall.objects.filter(task_id=task.id)}
    reviewed = set(
        ReviewRequest.objects.filter(tool_call__task_id=task.id).values_list(
            "tool_call__call_id", flat=True
        )
    )
    calls: list[dict[str, Any]] = []
    steps: list[dict[str, Any]] = []
    for d in decisions:
        turn = d["turn"]
        step_calls = [
            _call_entry(turn, c, rows.get(c.get("call_id", "")), c.get("call_id") in reviewed)
            for c in d.get("calls") or []
        ]
        calls += step_calls
        steps.append(
            {
                "turn": turn,
                "text": (d.get("text") or "")[:2000],
                "final": d.get("final"),
                "calls": [
                    {k: c[k] for k in ("tool", "args", "args_hash", "status", "error_class")}
                    for c in step_calls
                ],
                "duration_ms": round(
                    (d.get("duration_ms") or 0) + sum(c["duration_ms"] or 0 for c in step_calls),
                    3,
                ),
                "cost_usd": d.get("cost_usd") or 0,
                "tokens": (d.get("prompt_tokens") or 0) + (d.get("completion_tokens") or 0),
            }
        )
    return {
        "decisions": decisions,
        "calls": calls,
        "steps": steps,
        "status": task.status,
        "final": task.result,
        "steps_used": task.steps_used,
        "cost_usd": float(task.cost_usd),
        "seconds": round(task.seconds_used, 3),
        "files": _final_files(task),
    }


def _final_files(task: Task) -> dict[str, str]:
    """{path: sha256 of the content} at the task's head checkpoint."""
    try:
        at = workspace_at(task=task)
    except FilesUnreadable:
        return {}
    return {path: entry.hash for path, entry in at.manifest.items()}


def first_checkpoint_files(*, task: Task) -> dict[str, str]:
    """{path: text} of the task's workspace at its first checkpoint (where a replay starts)."""
    first = Checkpoint.objects.filter(task=task).order_by("seq").first()
    if first is None:
        raise CaseUnsavable("the task has no checkpoint")
    try:
        at = workspace_at(task=task, checkpoint_id=first.id)
    except FilesUnreadable as exc:
        raise CaseUnsavable(str(exc)) from None
    files: dict[str, str] = {}
    store = blob_store()
    for path, entry in sorted(at.manifest.items()):
        try:
            body = store.get(entry.hash)
        except (BlobMissing, BlobCorrupted) as exc:
            raise CaseUnsavable(f"{path}: {exc}") from None
        try:
            files[path] = body.decode("utf-8")
        except UnicodeDecodeError:
            raise CaseUnsavable(
                f"{path}: binary files in the first checkpoint's workspace cannot be saved "
                "in a case yet"
            ) from None
    return files


# --- the runtime's view: what the oracle answers from ------------------------------------------


@dataclass(frozen=True)
class ReplaySetup:
    case_name: str
    on_divergence: str
    # Recorded calls, in order (cases.selectors._call_entry).
    calls: list[dict[str, Any]]
    # {turn: model_decision payload} when the replay plays the recorded decisions.
    decisions: dict[int, dict[str, Any]] | None
    # (tool, arguments hash) of the calls the replay already made (a resumed replay).
    made: list[tuple[str, str]]


def replay_setup(*, task_id: Any) -> ReplaySetup | None:
    run = CaseRun.objects.select_related("case").filter(task_id=task_id).first()
    if run is None:
        return None
    recording = run.case.recording
    decisions = None
    if run.model == "recorded":
        decisions = {d["turn"]: d for d in recording.get("decisions", [])}
    made = [
        (tool, canonical_hash(args))
        for tool, args in ToolCall.objects.filter(task_id=task_id)
        .order_by("id")
        .values_list("tool", "arguments")
    ]
    return ReplaySetup(
        case_name=run.case.name,
        on_divergence=run.on_divergence,
        calls=list(recording.get("calls", [])),
        decisions=decisions,
        made=made,
    )


# --- verdict and comparison --------------------------------------------------------------------


def _divergence(task_id: Any) -> dict[str, Any] | None:
    event = (
        TaskEvent.objects.filter(task_id=task_id, type=EventType.REPLAY_DIVERGED)
        .order_by("id")
        .values("payload")
        .first()
    )
    return event["payload"] if event else None


def replay_verdict(
    *,
    case: Case,
    task: Task,
    replay: dict[str, Any],
    divergence: dict[str, Any] | None,
    first_divergent_step: int | None,
) -> dict[str, Any]:
    """{state: running | passed | failed, failures: [why, ...]}: a replay passes when it did
    what the recording did, step by step, and meets the case's criteria."""
    if task.status not in TERMINAL:
        return {"state": "running", "failures": []}
    criteria = CaseCriteria.model_validate(case.criteria)
    failures: list[str] = []
    if divergence is not None:
        failures.append(f"diverged at step {divergence.get('turn')}: {divergence.get('reason')}")
    elif first_divergent_step is not None:
        failures.append(f"differs from the recording from step {first_divergent_step}")
    if task.status != "succeeded":
        failures.append(f"ended {task.status} ({task.error_class}: {task.error_message[:300]})")
    final = task.result
    if criteria.final.equals is not None and final != criteria.final.equals:
        failures.append(f"final answer {final[:200]!r} != {criteria.final.equals[:200]!r}")
    for needle in criteria.final.contains:
        if needle not in final:
            failures.append(f"final answer lacks {needle[:200]!r}")
    files = replay["files"]
    for path in criteria.files_exist:
        if path not in files:
            failures.append(f"file {path} is missing")
    for path, digest in criteria.files_match.items():
        if files.get(path) != digest:
            failures.append(f"file {path} " + ("differs" if path in files else "is missing"))
    called = {c["tool"] for c in replay["calls"] if c["status"] == "succeeded"}
    proposed = {c["tool"] for c in replay["calls"]}
    for name in criteria.tools_called:
        if name not in called:
            failures.append(f"tool {name} was not called")
    for name in criteria.tools_not_called:
        if name in proposed:
            failures.append(f"tool {name} was called")
    if criteria.max_steps is not None and task.steps_used > criteria.max_steps:
        failures.append(f"{task.steps_used} steps > {criteria.max_steps}")
    if criteria.max_cost_usd is not None and float(task.cost_usd) > criteria.max_cost_usd + 1e-9:
        failures.append(f"cost ${float(task.cost_usd):.6f} > ${criteria.max_cost_usd:.6f}")
    return {"state": "failed" if failures else "passed", "failures": failures}


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
    `replay` is `other`): a fork and its original, or two siblings. No verdict."""
    a, b = task_recording(task=task), task_recording(task=other)
    # A fork's first turns are its original's (not in its own events): shown as they were.
    if other.fork_of_id == task.id:
        _inherit(fork=b, original=a, turns=_inherited_turns(other))
    elif task.fork_of_id == other.id:
        _inherit(fork=a, original=b, turns=_inherited_turns(task))
    rows, first = _steps_compare(a, b, None)
    return {
        "task_id": str(task.id),
        "other_id": str(other.id),
        "siblings": [str(t) for t in task_siblings(task=task)],
        "first_divergent_step": first,
        "steps": rows,
        "files": _files_diff(a["files"], b["files"]),
        "totals": {"recorded": _totals(a), "replay": _totals(b)},
    }


def _inherit(*, fork: dict[str, Any], original: dict[str, Any], turns: int) -> None:
    fork["steps"] = [s for s in original["steps"] if s["turn"] <= turns] + fork["steps"]


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
