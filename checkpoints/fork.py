"""Fork with edits (issue #31 item 5): a sibling task started from one of a task's checkpoints —
its agent state, edited, and its workspace — while the original stays exactly as it is.

The sibling is a new task (`Task.fork_of` the original) whose first checkpoint is a copy of the
chosen one with the edits applied (a message, the pending calls' arguments, the system prompt)
and the same snapshot (blobs are content-addressed: nothing is copied); its spec is the
original's with the budget edits. It resumes from that checkpoint like any task: the workspace
is materialised from the snapshot, the pending calls go through the gate again (policy,
review), in its own ledger (a call's idempotency key names its task, so the original's key is
never reused)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from checkpoints import recovery
from checkpoints.selectors import checkpoint_get
from checkpoints.services import CheckpointCorrupted, checkpoint_build, checkpoint_decode
from tasks import services
from tasks.agent_state import AgentState
from tasks.events import EventType
from tasks.models import Task
from tasks.spec import BudgetSpec, TaskSpec
from tasks.states import TaskStatus

MAX_TEXT = 200_000


class MessageEdit(BaseModel):
    model_config = ConfigDict(extra="forbid")

    index: int = Field(ge=0, le=100_000)
    content: str = Field(max_length=MAX_TEXT)


class ForkEdits(BaseModel):
    """What changes in the sibling: messages of the state (by index), the pending calls'
    arguments (by call id), the system prompt, the budget."""

    model_config = ConfigDict(extra="forbid")

    messages: list[MessageEdit] = Field(default_factory=list, max_length=100)
    pending_args: dict[str, dict[str, Any]] = Field(default_factory=dict, max_length=100)
    system_prompt: str | None = Field(default=None, max_length=50_000)
    budget: dict[str, Any] | None = None


class ForkRefused(ValueError):
    """Edits that do not apply to the checkpoint (`field` names which)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def _state_edit(state: AgentState, edits: ForkEdits) -> None:
    for edit in edits.messages:
        if edit.index >= len(state.messages):
            raise ForkRefused("messages.index", f"the state has {len(state.messages)} messages")
        state.messages[edit.index].content = edit.content
    if edits.system_prompt is not None:
        if not state.messages or state.messages[0].role != "system":
            raise ForkRefused("system_prompt", "the state has no system message")
        state.messages[0].content = edits.system_prompt
    pending = {call.call_id: call for call in state.pending}
    for call_id, args in edits.pending_args.items():
        if call_id not in pending:
            known = ", ".join(pending) or "none"
            raise ForkRefused("pending_args", f"no pending call {call_id} (pending: {known})")
        pending[call_id].args = args
        # The assistant message that proposed it says what the sibling runs.
        for message in state.messages:
            for call in message.calls or []:
                if call.call_id == call_id:
                    call.args = args


def _spec_edit(task: Task, edits: ForkEdits) -> TaskSpec:
    spec = dict(task.spec)
    spec["title"] = f"fork of {task.title}"[:200]
    if edits.budget:
        spec["budget"] = {**spec.get("budget", {}), **edits.budget}
    try:
        checked = TaskSpec.model_validate(spec)
        BudgetSpec.model_validate(checked.budget.model_dump())
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ForkRefused(".".join(str(p) for p in first["loc"]), first["msg"]) from None
    return checked


def task_fork(
    *,
    task: Task,
    checkpoint_id: Any,
    user: User,
    edits: ForkEdits,
    reason: str = "",
) -> Task:
    """A sibling of `task` from its checkpoint `checkpoint_id`, with `edits`, queued. The
    original task, its checkpoints, workspace and ledger are not touched. Audited."""
    checkpoint = checkpoint_get(task=task, checkpoint_id=checkpoint_id)
    try:
        loaded = checkpoint_decode(checkpoint)
    except CheckpointCorrupted as exc:
        raise ForkRefused("checkpoint_id", str(exc)) from None
    state = loaded.state.model_copy(deep=True)
    _state_edit(state, edits)
    spec = _spec_edit(task, edits)
    with transaction.atomic():
        sibling = services.task_create(spec=spec, user=user, enqueue=False, fork_of=task)
        head = checkpoint_build(
            task_id=sibling.id,
            seq=1,
            state=state,
            level="task",
            trigger="fork",
            snapshot=loaded.snapshot,
            # The state is the original's, made under the code its checkpoint names.
            versions=checkpoint.versions,
        )
        head.save(force_insert=True)
        services.task_fork_head(task=sibling, checkpoint_id=head.id, state=state, rollback=False)
        services.event_record(
            task_id=sibling.id,
            type=EventType.FORK,
            payload={
                "from_task": str(task.id),
                "from_checkpoint": str(checkpoint.id),
                "seq": checkpoint.seq,
                # The original's turns the fork starts from unchanged (a turn whose calls are
                # pending goes on in the fork, perhaps edited).
                "inherited_turns": state.turn_index - (1 if state.pending else 0),
                "edits": edits.model_dump(mode="json", exclude_defaults=True),
            },
            actor=user.get_username(),
        )
        services.audit_record(
            user=user,
            action="task_fork",
            task_id=task.id,
            target=f"fork {sibling.id}",
            reason=reason,
            after={"checkpoint_id": str(checkpoint.id), "sibling": str(sibling.id)},
        )
        sibling = services.task_transition(
            task_id=sibling.id, to=TaskStatus.QUEUED, reason="forked", actor=user.get_username()
        )
        services.task_enqueue(task=sibling, decided=True)
    return sibling


def task_adopt(*, task_id: Any, sibling: Task, user: User, reason: str) -> Task:
    """ "Adopt this branch": the original rolls forward to its finished fork's head — that
    checkpoint's state and workspace become the original's new head (a recovery fork, as a
    rollback writes one: later checkpoints superseded, a pending review canceled), and the
    original resumes from it. Only a fork that succeeded is adopted: its state has nothing
    pending that the original's ledger could hold under the same call id. Audited (`adopt`)."""
    if sibling.fork_of_id is None or str(sibling.fork_of_id) != str(task_id):
        raise ForkRefused("sibling_id", "not a fork of this task")
    if sibling.status != TaskStatus.SUCCEEDED:
        raise ForkRefused("sibling_id", f"the fork is {sibling.status}; only a finished one")
    head = checkpoint_get(task=sibling, checkpoint_id=sibling.head_checkpoint_id)
    try:
        adopted = checkpoint_decode(head)
    except CheckpointCorrupted as exc:
        raise ForkRefused("sibling_id", str(exc)) from None
    with transaction.atomic():
        task = recovery.lock_for_recovery(task_id)
        result = recovery.fork_checkpoint(
            task=task,
            user=user,
            kind=EventType.ADOPT,
            reason=recovery.reason_required(reason),
            resume=True,
            base=recovery.newest_valid(task),
            state=adopted.state,
            snapshot=adopted.snapshot,
            event={"sibling_id": str(sibling.id), "sibling_checkpoint": str(head.id)},
            enqueue=False,
        )
    recovery.restore_after_commit(
        [("workspace", result.task.workspace_path, adopted.snapshot)], [result.task]
    )
    return result.task
