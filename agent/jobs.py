"""RQ jobs. Thin: take primitive ids, call one service. Enqueued by dotted path
(`tasks.services.RUN_TASK_JOB`), so the apps below never import the loop."""

from __future__ import annotations

from agent.graph_runner import graph_task_run, is_graph_task
from agent.runtime import task_run


def run_task(task_id: str) -> str:
    # A task runs the harness's own loop, or an operator-registered LangGraph graph.
    if is_graph_task(task_id=task_id):
        return graph_task_run(task_id=task_id)
    return task_run(task_id=task_id)
