"""Read-side queries for checkpoints."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from checkpoints.models import Checkpoint


def task_checkpoint_marks(*, task_id: Any) -> list[dict[str, Any]]:
    """The task's checkpoints (by seq) without their payloads: what the timeline plots."""
    return list(
        Checkpoint.objects.filter(task_id=task_id).order_by("seq").values(
            "id", "seq", "level", "trigger", "step_index", "superseded", "created_at",
            "size_bytes",
        )
    )


def task_checkpoints(*, task_id: Any) -> QuerySet[Checkpoint]:
    """The task's checkpoints by seq (payloads deferred until a page of them is verified)."""
    return Checkpoint.objects.filter(task_id=task_id).order_by("seq")
