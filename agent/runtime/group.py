"""A run in a multi-agent group (multiagent/): global checkpoint rounds and waking the parent."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction

from agent.runtime.run import Paused, Run
from multiagent import coordinator, delegation
from tasks import services
from tasks.events import EventType
from tasks.models import Task, ToolCall
from tasks.spec import DELEGATE_TOOL
from tasks.states import TaskStatus
from tasks.tools.registry import ToolSpec

log = logging.getLogger(__name__)


def prepare_for_round(run: Run, round_id: Any, *, hold: bool = True) -> None:
    """Two-phase commit, phase one: at this step boundary write a local checkpoint and a
    vote in one write, then hold (`prepared`; the job ends) until the round ends. Without
    `hold` (a round this task opened itself), it goes on at once when its vote completes
    the round, and holds only while another participant has yet to prepare."""
    voted: list[bool] = []

    def vote(checkpoint: Any) -> None:
        if coordinator.round_vote(
            round_id=round_id, task_id=run.task_id, checkpoint_id=checkpoint.id
        ):
            if hold:
                _hold_prepared(run)
            voted.append(True)

    run.event(EventType.GLOBAL_PREPARE, {"round_id": str(round_id)})
    run.commit(trigger="global_prepare", level="step", then=vote)
    run.watchdog.hold_round_id = None
    if not voted:
        return
    # This vote may complete the round: commit it now rather than at the next sweep.
    coordinator.round_advance(round_id=round_id)
    if hold:
        raise Paused()
    with transaction.atomic():
        if not coordinator.round_still_holds(round_id=round_id, task_id=run.task_id):
            return
        _hold_prepared(run)
    raise Paused()


def _hold_prepared(run: Run) -> None:
    services.task_transition(
        task_id=run.task_id,
        to=TaskStatus.PREPARED,
        expect_epoch=run.epoch,
        reason="prepared for a global checkpoint",
        fields={"worker_id": ""},
    )


def checkpoint_group_before(run: Run, row: ToolCall, tool: ToolSpec) -> None:
    """Trigger `before_side_effects` (harness.yaml multi_agent.global_checkpoints): a
    global checkpoint of the group before its root runs a side-effecting call. The root
    prepares right here; its children are stopped by then (a parent waits for them), so
    the round usually commits at once and the call goes ahead."""
    if (
        not tool.side_effect
        or tool.name == DELEGATE_TOOL
        or run.task.parent_id is not None
        or not run.spec.agents
        or "before_side_effects" not in run.config.multi_agent.global_checkpoints
    ):
        return
    round_id = coordinator.round_before_call(
        root_id=run.task_id, call_id=row.call_id, tool=tool.name
    )
    if round_id is not None:
        prepare_for_round(run, round_id, hold=False)


def wake_parent(run: Run) -> None:
    """A child that ended may be the last one its parent waits for; a participant that
    ended before it could prepare may be the last one a round waits for."""
    try:
        if run.task.parent_id is not None:
            delegation.delegation_wake(parent_id=run.task.parent_id)
        hold = Task.objects.values_list("hold_round_id", flat=True).get(id=run.task_id)
        if hold is not None:
            coordinator.round_advance(round_id=hold)
    except Exception:  # the sweep does it later
        log.exception("task %s: waking its parent or advancing its round failed", run.task_id)
