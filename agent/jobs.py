"""RQ jobs. Thin: take primitive ids, call one service. Enqueued by dotted path
(`tasks.services.RUN_TASK_JOB`), so the apps below never import the loop."""

from __future__ import annotations

from rq import get_current_job
from rq.timeouts import JobTimeoutException

from agent.graph_runner import graph_task_run, is_graph_task
from agent.openai_agents_runner import is_openai_agents_task, openai_agents_task_run
from agent.pydantic_ai_runner import is_pydantic_ai_task, pydantic_ai_task_run
from agent.runtime import task_run
from agent.runtime.run import worker_identity
from tasks.services import task_settle_killed_horse


def run_task(task_id: str) -> str:
    # A task runs the harness's own loop, an operator-registered LangGraph graph, or an
    # operator-registered agent of another SDK (Pydantic AI, the OpenAI Agents SDK).
    try:
        if is_graph_task(task_id=task_id):
            return graph_task_run(task_id=task_id)
        if is_pydantic_ai_task(task_id=task_id):
            return pydantic_ai_task_run(task_id=task_id)
        if is_openai_agents_task(task_id=task_id):
            return openai_agents_task_run(task_id=task_id)
        return task_run(task_id=task_id)
    except JobTimeoutException:
        # The job's hard timeout (tasks.services.task_job_timeout_s) reached the loop itself.
        job = get_current_job()
        task_settle_killed_horse(
            task_id=task_id,
            worker_id=worker_identity(),
            timed_out_s=float(job.timeout) if job is not None and job.timeout else 0.0,
        )
        raise
