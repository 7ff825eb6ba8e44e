"""A `version_drift` review on its page (issue #43): what changed under the call, the old and
the new schema side by side, and the four choices (continue, migrate, restart, cancel) posted
to the same decision view as every review (dashboard.views.review_page)."""

from __future__ import annotations

import json
from typing import Any

from django.http import QueryDict

from checkpoints.models import Checkpoint
from checkpoints.selectors import graph_checkpoints, graph_task, task_checkpoints
from harness_base.config import harness_config, migration_entry
from review.models import ReviewRequest
from review.services import VERSION_DRIFT, migrate_refusal

# The newest checkpoints a restart may choose from, on the page (the API takes any id).
RESTART_CHOICES = 50


def _pretty(body: Any) -> str:
    return json.dumps(body, indent=2, ensure_ascii=False, sort_keys=True) if body else ""


def drift_context(review: ReviewRequest) -> dict[str, Any]:
    """The page's view of the drift; empty for any other kind of review."""
    if review.kind != VERSION_DRIFT:
        return {"version_drift": False}
    drift = review.drift or {}
    changes = [
        {
            **change,
            "old_text": _pretty(change.get("old_body")),
            "new_text": _pretty(change.get("new_body")),
        }
        for change in drift.get("changes") or []
    ]
    checkpoints: list[dict[str, Any]] | list[Checkpoint]
    if graph_task(review.task):  # a graph restarts from one of its LangGraph checkpoints
        checkpoints = [
            {"id": c["checkpoint_id"], "seq": c["step"], "trigger": c["source"] or "graph"}
            for c in graph_checkpoints(task=review.task)
            if not c["superseded"]
        ][:RESTART_CHOICES]
    else:
        checkpoints = list(
            task_checkpoints(task_id=review.task_id)
            .order_by("-seq")
            .only("id", "seq", "trigger", "step_index", "created_at")[:RESTART_CHOICES]
        )
    return {
        "version_drift": True,
        "drift": drift,
        "drift_changes": changes,
        "drift_migrations": [
            (name, migration_entry(ref).description)
            for name, ref in sorted(harness_config().migrations.items())
        ],
        "drift_checkpoints": checkpoints,
        # A graph or SDK agent's task has no harness-loop state to migrate: the page says so
        # instead of offering a form the decision would refuse.
        "drift_migrate_refused": migrate_refusal(review),
    }


def drift_decision_fields(post: QueryDict) -> dict[str, Any]:
    """A choice's own fields as posted: the migration's name, the checkpoint to restart from."""
    return {
        "migration": post.get("migration") or None,
        "checkpoint_id": post.get("checkpoint_id") or None,
    }


def drift_arguments(post: QueryDict, review: ReviewRequest) -> dict[str, Any] | None:
    """`continue`'s arguments as edited on the page (JSON): None when unchanged. Raises
    ValueError for text that is not a JSON object."""
    text = post.get("arguments", "").strip()
    if not text:
        return None
    arguments = json.loads(text)
    if not isinstance(arguments, dict):
        raise ValueError("the arguments must be a JSON object")
    return None if arguments == review.arguments else arguments
