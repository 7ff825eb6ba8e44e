"""Our side of the loop benchmark: a scripted task of read-only or write_file steps run by
`agent.runtime.task_run` in-process, its stored bytes, checkpoint growth and retention."""

from __future__ import annotations

import shutil
import uuid
from typing import Any

from bench.common import (
    scripted_task,
    tasks_delete,
    timed,
)
from bench.durable_write import chat_text

VARIANTS = ("read", "write")


WRITE_CHARS = 300


def write_args(i: int, run: str) -> dict[str, str]:
    """The `write` variant's i-th call of a run: the same in ours and in LangGraph's tool.
    The run's id in the text keeps content-addressed blobs of earlier runs from being reused."""
    return {"path": f"notes/{i}.txt", "content": f"{run} {chat_text(i, WRITE_CHARS - 33)}"}


def _call(variant: str, i: int, run: str) -> tuple[str, dict[str, Any]]:
    return ("noop", {}) if variant == "read" else ("write_file", write_args(i, run))


def ours_prepare(steps: int, variant: str = "read") -> Any:
    run = uuid.uuid4().hex
    calls = [_call(variant, i, run) for i in range(steps)]
    return scripted_task(
        script=[{"call": tool, "args": args} for tool, args in calls] + [{"final": "done"}],
        tools=[calls[0][0]],
        title=f"bench loop {variant} {steps}",
        max_steps=steps + 1,
    )


def ours_cleanup(task: Any) -> None:
    tasks_delete([task.id])
    shutil.rmtree(task.workspace_path, ignore_errors=True)


def ours_run(task: Any) -> None:
    from agent.runtime import task_run

    outcome = task_run(task_id=task.id)
    if outcome != "succeeded":
        raise RuntimeError(f"benchmark task {task.id} ended {outcome}")


def ours_stored_bytes(task_id: Any, blobs_since: Any = None) -> int:
    """Bytes of the task's rows, plus the snapshot blobs stored since `blobs_since` (the
    blobs its run created: blobs are shared, so they belong to no task)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT coalesce(sum(pg_column_size(c.*)), 0) FROM checkpoints_checkpoint c"
            "        WHERE c.task_id = %(t)s)"
            "     + (SELECT coalesce(sum(pg_column_size(e.*)), 0) FROM tasks_taskevent e"
            "        WHERE e.task_id = %(t)s)"
            "     + (SELECT coalesce(sum(pg_column_size(k.*)), 0) FROM tasks_toolcall k"
            "        WHERE k.task_id = %(t)s)"
            "     + (SELECT coalesce(sum(pg_column_size(o.*)), 0) FROM tasks_tooloutput o"
            "        WHERE o.task_id = %(t)s)"
            "     + (SELECT coalesce(sum(pg_column_size(b.*)), 0) FROM checkpoints_blob b"
            "        WHERE %(since)s::timestamptz IS NOT NULL AND b.created_at >= %(since)s)",
            {"t": task_id, "since": blobs_since},
        )
        return int(cursor.fetchone()[0])


def ours_checkpoint_growth(task_id: Any, *, per: int = 50) -> list[int]:
    """Average stored bytes of a checkpoint row per `per` steps: whether state is bounded."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT step_index / %s, avg(pg_column_size(c.*))::int FROM checkpoints_checkpoint c"
            " WHERE c.task_id = %s GROUP BY 1 ORDER BY 1",
            [per, task_id],
        )
        return [size for _, size in cursor.fetchall()]


def ours_samples(steps: int, repeat: int, variant: str = "read") -> tuple[list[float], list[float]]:
    """(seconds per run, stored bytes per step per run)."""
    from django.utils import timezone

    seconds, per_step = [], []
    for _ in range(repeat):
        task = ours_prepare(steps, variant)
        started = timezone.now()
        seconds.append(timed(lambda task=task: ours_run(task)))
        per_step.append(ours_stored_bytes(task.id, started) / steps)
        ours_cleanup(task)
    return seconds, per_step


def ours_retention(steps: int) -> dict[str, Any]:
    """Stored bytes of one finished `write` task before and after retention."""
    from django.utils import timezone

    from checkpoints.models import Checkpoint
    from checkpoints.retention import checkpoints_thin_task
    from harness_base.config import harness_config

    task = ours_prepare(steps, "write")
    started = timezone.now()
    ours_run(task)
    before = ours_stored_bytes(task.id, started)
    checkpoints_before = Checkpoint.objects.filter(task_id=task.id).count()
    policy = harness_config().retention
    deleted = checkpoints_thin_task(task_id=task.id, policy=policy)
    after = ours_stored_bytes(task.id, started)
    ours_cleanup(task)
    return {
        "steps": steps,
        "bytes_before": before,
        "bytes_after": after,
        "checkpoints_before": checkpoints_before,
        "checkpoints_deleted": deleted,
        "policy": policy.model_dump(),
    }
