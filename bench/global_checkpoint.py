"""Global checkpoints: the time to take one over a group of 2, 8 and 32 participants.

A group is a root task and N-1 children, each with a real head checkpoint (an AgentState of a
few messages and a small workspace snapshot), built in the database without workers.

- *Stopped group*: the root waits for its children, which have all finished — the default
  trigger (`children_finished`). `coordinator.round_start` locks the group, opens the round,
  prepares every participant with its head, commits the GlobalCheckpoint and releases them:
  the whole two-phase round in one call.
- *Running group*: every participant is running. Timed from `round_start` to the commit: each
  participant's prepare as its worker writes it (a local checkpoint, the vote and the move to
  `prepared` in one transaction, then `round_advance`), one after the other, plus the release.
  Not included: the time a worker needs to reach its next step boundary and notice the round
  (at most one heartbeat interval, `HARNESS_HEARTBEAT_S`, plus the step it is in).
- *Stopped group with a shared directory* (TaskSpec `shared`): the same round over 8
  participants, plus the snapshot of a shared directory of SHARED_FILES files, of which one
  changes before each round (the commit captures it incrementally).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from bench.common import figure, sample_interleaved, stats, tasks_delete

TITLE = "Global checkpoints"
SIZES = {"smoke": {"groups": [2, 8], "n": 3}, "full": {"groups": [2, 8, 32], "n": 30}}
# A round over 32 stopped participants within one durable step write's order of magnitude.
TARGET_MS = {2: 20.0, 8: 40.0, 32: 120.0}
SHARED_FILES = {"smoke": 20, "full": 500}


def _group(size: int, *, status: str, shared: bool = False) -> list[Any]:
    """A root and size-1 children, each with a head checkpoint; -> their ids (root first)."""
    from checkpoints.services import checkpoint_build
    from tasks.agent_state import AgentState, Message
    from tasks.models import Task

    spec = {
        "title": "bench",
        "goal": "bench",
        "model": {"kind": "scripted", "script": [{"final": "x"}]},
    }
    root = Task.objects.create(
        title="bench group", goal="bench", spec={**spec, "shared": shared}, status=status
    )
    tasks = [root]
    for i in range(size - 1):
        tasks.append(
            Task.objects.create(
                title=f"bench child {i}",
                goal="bench",
                spec=spec,
                status=status,
                parent=root,
                parent_call_id=f"0.1.{i}",
                agent_name="worker",
            )
        )
    state = AgentState(
        messages=[Message(role="system", content="s" * 400), Message(role="user", content="goal")]
    )
    snapshot = {"v": 1, "root": "0" * 64, "files": 3, "bytes": 3000}
    for task in tasks:
        checkpoint = checkpoint_build(
            task_id=task.id,
            seq=0,
            state=state,
            level="step",
            trigger="after_step",
            snapshot=snapshot,
            parent_id=None,
        )
        checkpoint.save(force_insert=True)
        Task.objects.filter(id=task.id).update(head_checkpoint=checkpoint, lease_epoch=1)
    return [t.id for t in tasks]


def shared_path_of(root_id: Any) -> Path:
    from multiagent.shared import shared_path

    return shared_path(root_id=root_id)


def _stopped_round(root_id: Any) -> None:
    from multiagent import coordinator

    round = coordinator.round_start(root_id=root_id, trigger="children_finished")
    assert round.status == "committed", round.status


def _shared_round(root_id: Any, counter: list[int]) -> None:
    """One shared file changes (as an agent's write would), then a stopped round."""
    counter[0] += 1
    (shared_path_of(root_id) / "notes" / "f0.txt").write_text(f"edit {counter[0]}\n")
    _stopped_round(root_id)


def _shared_files(root_id: Any, count: int) -> None:
    folder = shared_path_of(root_id) / "notes"
    folder.mkdir(parents=True)
    for i in range(count):
        (folder / f"f{i}.txt").write_text(f"shared file {i}\n" * 40)


def _running_round(ids: list[Any]) -> None:
    """Every participant prepares as its worker would, then the round commits."""
    from django.db import transaction

    from checkpoints.services import checkpoint_build, checkpoint_next_seq
    from multiagent import coordinator
    from tasks import services
    from tasks.agent_state import AgentState
    from tasks.models import Task
    from tasks.states import TaskStatus

    round = coordinator.round_start(root_id=ids[0], trigger="manual")
    state = AgentState()
    for task_id in ids:
        checkpoint = checkpoint_build(
            task_id=task_id,
            seq=checkpoint_next_seq(task_id=task_id),
            state=state,
            level="step",
            trigger="global_prepare",
            snapshot=None,
            parent_id=None,
        )
        with transaction.atomic():
            services.task_fenced_write(task_id=task_id, epoch=1, inserts=[checkpoint])
            coordinator.round_vote(round_id=round.id, task_id=task_id, checkpoint_id=checkpoint.id)
            services.task_transition(
                task_id=task_id, to=TaskStatus.PREPARED, expect_epoch=1, reason="bench"
            )
        coordinator.round_advance(round_id=round.id)
    round.refresh_from_db()
    assert round.status == "committed", round.status
    # Released participants are queued; run them again for the next sample.
    Task.objects.filter(id__in=ids).update(status=TaskStatus.RUNNING)


def run(size: str) -> dict[str, Any]:
    from tasks.states import TaskStatus

    params = SIZES[size]
    figures = []
    details: dict[str, Any] = {}
    created: list[Any] = []
    try:
        for n in params["groups"]:
            stopped = _group(n, status=TaskStatus.SUCCEEDED)
            running = _group(n, status=TaskStatus.RUNNING)
            created += stopped + running
            samples = sample_interleaved(
                {
                    "stopped": lambda s=stopped: _stopped_round(s[0]),
                    "running": lambda r=running: _running_round(r),
                },
                n=params["n"],
                warmup=1,
            )
            ours = stats(samples["stopped"], scale=1000)
            figures.append(
                figure(
                    figure=f"Global checkpoint, {n} stopped participants (one round)",
                    unit="ms",
                    ours=ours,
                    target=f"<= {TARGET_MS[n]:g} ms",
                    met=ours["median"] <= TARGET_MS[n],
                )
            )
            figures.append(
                figure(
                    figure=f"Global checkpoint, {n} running participants (prepare + commit)",
                    unit="ms",
                    ours=stats(samples["running"], scale=1000),
                    target="informational (plus reaching a step boundary)",
                    met=None,
                )
            )
            details[f"group_{n}"] = {"participants": n, "samples": params["n"]}
        shared = _group(8, status=TaskStatus.SUCCEEDED, shared=True)
        created += shared
        _shared_files(shared[0], SHARED_FILES[size])
        counter = [0]
        samples = sample_interleaved(
            {"shared": lambda: _shared_round(shared[0], counter)}, n=params["n"], warmup=1
        )
        figures.append(
            figure(
                figure=(
                    f"Global checkpoint, 8 stopped participants + a shared directory of "
                    f"{SHARED_FILES[size]} files (one changed)"
                ),
                unit="ms",
                ours=stats(samples["shared"], scale=1000),
                target="informational",
                met=None,
            )
        )
        details["shared"] = {"participants": 8, "files": SHARED_FILES[size]}
    finally:
        for root_id in created:
            shutil.rmtree(shared_path_of(root_id), ignore_errors=True)
        tasks_delete(created)
    return {
        "title": TITLE,
        "figures": figures,
        "notes": (
            "Stopped: `coordinator.round_start` over a group whose root waits and whose "
            "children have finished (the default `children_finished` trigger): lock the group, "
            "open the round, prepare everyone with their head, commit, release. Running: from "
            "`round_start` to the commit when every participant prepares as its worker does "
            "(fenced local checkpoint + vote + `prepared` in one transaction, then "
            "`round_advance`), sequentially; the time to reach a step boundary is not included."
        ),
        "details": details,
    }
