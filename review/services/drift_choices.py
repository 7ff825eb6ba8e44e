"""What a `version_drift` decision checks and records (review.services.version_drift): the
arguments of a `continue` against the new schema the review showed and the policy, and the
close of the review and its call for `migrate`, `restart` and `cancel`."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib.auth.models import User

from harness_base.config import harness_config
from review.models import ReviewRequest, ReviewStatus
from review.policy import PolicyDecision
from review.services.closing import review_close_recorded
from review.services.edits import edit_policy
from review.services.errors import ReviewConflict, ReviewInvalid
from tasks.drift_schema import arguments_check
from tasks.models import Task
from tasks.selectors import task_tool
from tasks.services import toolcall_transition

# The SDK agents' tasks (a spec's agent.kind), whose state a migration does not map.
SDK_KINDS = ("pydantic-ai", "openai-agents")


def drift_new_schema(drift: dict[str, Any] | None) -> Any:
    """The argument schema of the pending call's tool under the new code, as the review shows
    it (None: unknown, e.g. the tool is gone)."""
    return (drift or {}).get("schema")


def drift_edit_check(*, review: ReviewRequest, arguments: Any) -> PolicyDecision | None:
    """The arguments a `continue` would run: a JSON object valid against the new schema the
    review showed (fields named as `arguments.<field>`), not denied by the policy. Returns the
    policy's decision on them (the edit is held to it), None when the tool is unknown here."""
    if not isinstance(arguments, dict):
        raise ReviewInvalid(
            "arguments must be a JSON object",
            errors=[{"field": "arguments", "message": "must be a JSON object"}],
        )
    drift = review.drift or {}
    if drift.get("nodes_gone"):
        raise ReviewConflict(
            f"the graph's next node {', '.join(drift['nodes_gone'])} is gone from the new code: "
            "continue has no node to run; migrate, restart or cancel"
        )
    schema = drift_new_schema(drift)
    if schema is None and drift.get("tool_gone"):
        raise ReviewConflict(
            f"tool {review.tool!r} is gone from the new code: migrate, restart or cancel"
        )
    valid, errors = arguments_check(schema, arguments)
    if valid is False:
        raise ReviewInvalid(
            f"the arguments do not fit {review.tool}'s new schema: "
            + "; ".join(f"{e['field']}: {e['message']}" for e in errors[:5]),
            errors=errors,
        )
    tool = task_tool(task_id=review.task_id, name=review.tool)
    if tool is None:
        return None
    return edit_policy(tool=tool, arguments=arguments, spec=review.task.spec)


def migrate_refusal(review: ReviewRequest) -> str | None:
    """Why `migrate` does not apply to this review's task (None when it does): migrations map
    the harness loop's state, which a LangGraph or SDK agent's task does not have."""
    if review.task.graph_checkpoints.exists():
        return (
            "migrate does not apply to a LangGraph task yet (migrations map the harness "
            "loop's state): restart from one of its graph checkpoints, or cancel"
        )
    sdk = (review.task.spec.get("agent") or {}).get("kind")
    if sdk in SDK_KINDS:
        return (
            f"migrate does not apply to a {sdk} task yet (migrations map the harness "
            "loop's state): continue, restart from one of its checkpoints, or cancel"
        )
    return None


def _choice(
    *, review: ReviewRequest, decision: str, migration: str | None, checkpoint_id: Any
) -> dict[str, Any]:
    if decision == "migrate":
        refused = migrate_refusal(review)
        if refused:
            raise ReviewConflict(refused)
        known = harness_config().migrations
        if not migration or migration not in known:
            raise ReviewInvalid(
                "migrate names a migration registered in harness.yaml `migrations:`",
                errors=[
                    {
                        "field": "migration",
                        "message": "one of: " + (", ".join(sorted(known)) or "(none registered)"),
                    }
                ],
            )
        return {"decision": decision, "migration": migration}
    if decision == "restart":
        # A graph task restarts from one of its (root) graph checkpoints, named as LangGraph does.
        named = str(checkpoint_id) if checkpoint_id is not None else ""
        if (
            named
            and review.task.graph_checkpoints.filter(checkpoint_ns="", checkpoint_id=named).exists()
        ):
            return {"decision": decision, "checkpoint_id": named}
        try:
            checkpoint_id = uuid.UUID(str(checkpoint_id)) if checkpoint_id is not None else None
        except ValueError:
            checkpoint_id = None
        if checkpoint_id is None or not review.task.checkpoints.filter(id=checkpoint_id).exists():
            raise ReviewInvalid(
                "restart names an earlier checkpoint of this task",
                errors=[{"field": "checkpoint_id", "message": "not a checkpoint of this task"}],
            )
        return {"decision": decision, "checkpoint_id": str(checkpoint_id)}
    return {"decision": decision}


def choice_close(
    *,
    task: Task,
    review: ReviewRequest,
    user: User,
    decision: str,
    migration: str | None,
    checkpoint_id: Any,
    comment: str,
    now: Any,
    via: str,
) -> dict[str, Any]:
    """Close the review with `decision` (migrate | restart | cancel): the call does not run
    as it is (rejected, saying what was chosen), the event, the audit entry and the receipt.
    Caller holds both locks; returns the recorded choice."""
    choice = _choice(
        review=review, decision=decision, migration=migration, checkpoint_id=checkpoint_id
    )
    call = review.tool_call
    instead = {
        "migrate": f"migration {migration} applied instead",
        "restart": f"restarted from checkpoint {checkpoint_id}",
        "cancel": "the task was canceled",
    }[decision]
    toolcall_transition(
        call=call,
        task_locked=True,
        to="rejected",
        now=now,
        fields={
            "error_class": "version_drift",
            "error_message": f"the code changed under this call; {instead}"[:2000],
            "result": {"observation": f"not run: the code changed; {instead}"},
        },
    )
    review.choice = choice
    review_close_recorded(
        task=task,
        review=review,
        call=call,
        user=user,
        to=ReviewStatus.APPROVED if decision == "migrate" else ReviewStatus.REJECTED,
        decision=decision,
        comment=comment,
        now=now,
        via=via,
        fields={"choice": choice},
        payload={"kind": review.kind, "choice": choice},
        before={"status": "pending", "call": "awaiting_review"},
        after={"choice": choice},
        task_locked=True,
    )
    return choice
