"""Global checkpoints by a simplified two-phase commit. The coordinator is no blocked worker:
its steps are short database transactions run by whoever has a reason to advance the round
(the request or wake that starts it, the participant that prepares last, the sweep).

1. `round_start` sets every participant's `hold_round_id`. While it is set no worker may
   acquire the task, so a participant that is not running already holds still: it prepares
   at once with its head checkpoint. A running participant prepares at its next step
   boundary: the loop writes a local checkpoint and a RoundVote in one write and moves to
   `prepared` (its job ends).
2. `round_advance` commits once every participant has prepared: one transaction writes the
   GlobalCheckpoint naming each participant's local checkpoint and the snapshot of the group's
   shared directory (multiagent/shared.py, if it has one) and releases the participants
   (hold cleared, queued ones enqueued). Past the deadline it aborts instead: the same
   release, no global row.

A crash anywhere (kill -9 of a worker preparing or committing) leaves the round `preparing`;
the commit is one transaction, so a global checkpoint is complete or absent. The sweep
advances open rounds: a dead participant is stalled and redispatched to `queued` (held, so it
prepares with its head) or the deadline aborts the round; either way everyone runs again.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from harness_base.config import harness_config
from multiagent.models import (
    CheckpointRound,
    GlobalCheckpoint,
    RoundStatus,
    RoundTrigger,
    RoundVote,
)
from multiagent.selectors import group_lock
from multiagent.shared import shared_snapshot_capture
from tasks import services
from tasks.events import EventType
from tasks.models import Task
from tasks.states import TaskStatus


class RoundConflict(Exception):
    """A round is already open for the group, or the group has nobody to checkpoint."""


def round_start(*, root_id: Any, trigger: str, reason: str = "") -> CheckpointRound:
    """Open a round over the group of `root_id`, prepare whoever is not running, and commit
    at once when nobody runs. Raises RoundConflict while another round is open."""
    config = harness_config().multi_agent
    with transaction.atomic():
        members = group_lock(root_id=root_id)
        if any(t.hold_round_id is not None for t in members):
            raise RoundConflict("a global checkpoint round is already in progress")
        # A task that never wrote a checkpoint (not started yet) has no state to cut.
        participants = [
            t for t in members if t.head_checkpoint_id or t.status == TaskStatus.RUNNING
        ]
        if not participants:
            raise RoundConflict("no task of the group has a checkpoint yet")
        now = timezone.now()
        round = CheckpointRound.objects.create(
            root_id=root_id,
            trigger=trigger,
            participants=[str(t.id) for t in participants],
            deadline=now + timedelta(seconds=config.prepare_timeout_s),
            reason=reason[:2000],
        )
        services.tasks_hold(task_ids=[t.id for t in participants], round_id=round.id)
        services.event_record(
            task_id=root_id,
            type=EventType.GLOBAL_ROUND_STARTED,
            payload={
                "round_id": str(round.id),
                "trigger": trigger,
                "participants": round.participants,
            },
        )
        round_advance(round_id=round.id)
        round.refresh_from_db()
        return round


def round_before_call(*, root_id: Any, call_id: str, tool: str) -> Any | None:
    """Trigger `before_side_effects`: open a round before the group's root runs a
    side-effecting call, once it has children and once per call (a resumed call does not ask
    again). The root, running, prepares at once (agent.runtime). -> the round id, or None."""
    reason = f"before {tool} (call {call_id})"
    if not Task.objects.filter(parent_id=root_id).exists():
        return None
    if CheckpointRound.objects.filter(
        root_id=root_id, trigger=RoundTrigger.BEFORE_SIDE_EFFECTS, reason=reason
    ).exists():
        return None
    try:
        return round_start(
            root_id=root_id, trigger=RoundTrigger.BEFORE_SIDE_EFFECTS, reason=reason
        ).id
    except RoundConflict as exc:
        services.event_record(
            task_id=root_id, type=EventType.GLOBAL_CHECKPOINT_SKIPPED, payload={"reason": str(exc)}
        )
        return None


def round_still_holds(*, round_id: Any, task_id: Any) -> bool:
    """Inside a transaction: lock the task row and say whether the round still holds it (the
    round's release locks the same row, so the answer stays true until the caller commits)."""
    return (
        Task.objects.select_for_update(no_key=True)
        .filter(id=task_id, hold_round_id=round_id)
        .exists()
    )


def round_vote(*, round_id: Any, task_id: Any, checkpoint_id: Any) -> bool:
    """A running participant prepared at a step boundary with this local checkpoint. Call in
    the worker's transaction that wrote the checkpoint (its task row is locked). False when
    the round no longer holds the task (it ended meanwhile): the task just goes on."""
    held = Task.objects.filter(id=task_id, hold_round_id=round_id).exists()
    if not held:
        return False
    RoundVote.objects.get_or_create(
        round_id=round_id, task_id=task_id, defaults={"checkpoint_id": checkpoint_id}
    )
    return True


def round_advance(*, round_id: Any) -> str:
    """Commit the round when every participant has prepared, abort it past its deadline;
    otherwise leave it. Returns the round's status. Safe to call from anywhere, repeatedly."""
    with transaction.atomic():
        round = CheckpointRound.objects.filter(id=round_id).first()
        if round is None or round.status != RoundStatus.PREPARING:
            return round.status if round is not None else ""
        members = {str(t.id): t for t in group_lock(root_id=round.root_id)}
        # Lock contract: task rows first (group_lock), then the round. NO KEY UPDATE: a worker
        # inserting its vote (a foreign key to the round) must not wait for this lock.
        round = CheckpointRound.objects.select_for_update(no_key=True).get(id=round_id)
        if round.status != RoundStatus.PREPARING:
            return round.status
        votes = {str(v.task_id): v.checkpoint_id for v in round.votes.all()}
        for task_id in round.participants:
            task = members.get(task_id)
            if task_id in votes or task is None:
                continue
            # Not running: held still by the round (no worker may acquire it), so its head is
            # its state at the cut. A stalled, redispatched participant prepares this way too.
            if task.status != TaskStatus.RUNNING and task.head_checkpoint_id is not None:
                RoundVote.objects.create(
                    round=round, task_id=task.id, checkpoint_id=task.head_checkpoint_id
                )
                votes[task_id] = task.head_checkpoint_id
        missing = [t for t in round.participants if t not in votes and t in members]
        now = timezone.now()
        if not missing:
            _commit(round, votes, members, now)
        elif now >= round.deadline:
            round.status = RoundStatus.ABORTED
            round.finished_at = now
            round.reason = (
                f"{round.reason}; " if round.reason else ""
            ) + f"{len(missing)} participant(s) did not prepare in time"
            round.save(update_fields=["status", "finished_at", "reason"])
            services.event_record(
                task_id=round.root_id,
                type=EventType.GLOBAL_ROUND_ABORTED,
                payload={"round_id": str(round.id), "not_prepared": missing},
            )
        else:
            return round.status
        _release(round, members.values())
        return round.status


def _commit(
    round: CheckpointRound, votes: dict[str, Any], members: dict[str, Task], now: Any
) -> GlobalCheckpoint:
    seq = (
        GlobalCheckpoint.objects.filter(root_id=round.root_id).aggregate(m=Max("seq"))["m"] or 0
    ) + 1
    global_checkpoint = GlobalCheckpoint.objects.create(
        root_id=round.root_id,
        seq=seq,
        round=round,
        trigger=round.trigger,
        # `status`: where the participant stood at the cut (a group rollback returns it there).
        participants=[
            {
                "task_id": task_id,
                "checkpoint_id": str(votes[task_id]),
                "status": members[task_id].status,
            }
            for task_id in round.participants
            if task_id in votes
        ],
        # Every participant is held (no file tool writes), so this is the directory at the cut.
        shared_snapshot=shared_snapshot_capture(root=members[str(round.root_id)]),
        created_at=now,
    )
    round.status = RoundStatus.COMMITTED
    round.finished_at = now
    round.save(update_fields=["status", "finished_at"])
    services.event_record(
        task_id=round.root_id,
        type=EventType.GLOBAL_CHECKPOINT,
        payload={
            "global_checkpoint_id": str(global_checkpoint.id),
            "seq": seq,
            "trigger": round.trigger,
            "participants": len(global_checkpoint.participants),
        },
    )
    return global_checkpoint


def _release(round: CheckpointRound, members: Any) -> None:
    """Clear the hold; prepared participants are queued; queued ones (their jobs found them
    held and left) are enqueued again. Runs in the round's transaction."""
    services.tasks_release(round_id=round.id)
    for task in members:
        if str(task.id) not in round.participants:
            continue
        if task.status == TaskStatus.PREPARED:
            task = services.task_transition(
                task_id=task.id,
                to=TaskStatus.QUEUED,
                expect_from=[TaskStatus.PREPARED],
                reason=f"global checkpoint round {round.status}",
            )
            services.task_enqueue(task=task)
        elif task.status == TaskStatus.QUEUED:
            services.task_enqueue(task=task)


def rounds_advance_open() -> int:
    """The sweep's pass: advance every open round (commit what is complete, abort what is
    overdue). Returns how many rounds ended."""
    ended = 0
    for round_id in CheckpointRound.objects.filter(status=RoundStatus.PREPARING).values_list(
        "id", flat=True
    )[:200]:
        ended += round_advance(round_id=round_id) != RoundStatus.PREPARING
    return ended
