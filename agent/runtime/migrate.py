"""A registered migration applied (issue #43): a `version_drift` review decided `migrate`
names a function in harness.yaml `migrations:`; the worker that picks the task up next runs it
once on the head checkpoint's state and goes on from what it returns, recorded as a
`migration` checkpoint (its diff against the head is the migration's effect) and a
`version_migrated` event. The migrated state's pending calls get fresh call_ids: they are
calls nobody approved yet, so they pass the policy gate (and a review, if it asks) again.
A migration that fails reopens the version_drift review, saying why (agent.runtime
.migrate_failed)."""

from __future__ import annotations

import copy
from typing import Any

from django.utils.module_loading import import_string
from pydantic import ValidationError

from agent.runtime.migrate_failed import migration_failed
from agent.runtime.run import Run
from checkpoints.recovery import calls_rekey, new_branch
from harness_base.config import migration_entry
from review.selectors import task_migrations_chosen
from tasks.agent_state import AgentState
from tasks.events import EventType
from tasks.models import TaskEvent


def _pending(state: AgentState) -> list[dict[str, Any]]:
    return [
        {"call_id": call.call_id, "tool": call.tool, "arguments": call.args}
        for call in state.pending[state.next_call :]
    ]


class MigrationFailed(Exception):
    """The migration raised, returned no valid state, or is no longer registered."""


def _migrated(run: Run, *, name: str, drift: dict[str, Any]) -> AgentState:
    configured = run.config.migrations.get(name)
    if configured is None:
        raise MigrationFailed(f"migration {name!r} is no longer in harness.yaml")
    function = migration_entry(configured).function
    try:
        migrate = import_string(function.replace(":", "."))
        result = migrate(state=copy.deepcopy(run.state.model_dump(mode="json")), drift=drift)
        return AgentState.model_validate(result)
    except ValidationError as exc:
        raise MigrationFailed(f"migration {name} returned no valid state: {exc}"[:2000]) from None
    except Exception as exc:
        raise MigrationFailed(
            f"migration {name} failed: {type(exc).__name__}: {exc}"[:2000]
        ) from None


def migrations_apply(run: Run) -> None:
    """Apply each migration a decision chose and no run has applied yet, in the order chosen,
    each in its own durable write."""
    chosen = task_migrations_chosen(task_id=run.task_id)
    if not chosen:
        return
    applied = set(
        TaskEvent.objects.filter(task_id=run.task_id, type=EventType.VERSION_MIGRATED).values_list(
            "payload__review_id", flat=True
        )
    )
    for review_id, name, drift in chosen:
        if review_id in applied:
            continue
        before = _pending(run.state)
        try:
            state = _migrated(run, name=name, drift=drift)
        except MigrationFailed as exc:
            # A person chooses again, shown why (or, with no call pending, the task fails).
            migration_failed(run, review_id=review_id, drift=drift, error=str(exc))
        state.branch = new_branch(run.task, state)
        calls_rekey(state, None)
        run.state = state
        # What follows was made by this code: nothing pending is from before the pick-up.
        run.drift_calls = set()
        run.event(
            EventType.VERSION_MIGRATED,
            {
                "review_id": review_id,
                "migration": name,
                "pending_before": before,
                "pending_after": _pending(state),
            },
        )
        run.commit(trigger="migration", level="step")
