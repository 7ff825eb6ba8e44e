"""RQ jobs. Thin: take primitive ids, call one service."""

from __future__ import annotations


def run_task(task_id: str) -> str:
    from tasks.runtime import task_run

    return task_run(task_id=task_id)
