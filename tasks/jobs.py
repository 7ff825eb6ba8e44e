"""RQ jobs. Thin: take primitive ids, call one service."""

from __future__ import annotations


def run_task(task_id: str) -> str:
    # A task runs the harness's own loop, or an operator-registered LangGraph graph.
    from tasks.graph_runner import graph_task_run, is_graph_task

    if is_graph_task(task_id=task_id):
        return graph_task_run(task_id=task_id)
    from tasks.runtime import task_run

    return task_run(task_id=task_id)
