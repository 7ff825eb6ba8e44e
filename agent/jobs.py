"""RQ jobs. Thin: take primitive ids, call one service. Enqueued by dotted path
(`tasks.services.RUN_TASK_JOB`), so the apps below never import the loop."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from rq import get_current_job
from rq.timeouts import JobTimeoutException

from agent.handback import HANDED_BACK, graph_head_version, task_hand_back_if_newer
from agent.refs import object_at
from agent.runtime import task_run
from agent.runtime.run import worker_identity
from harness_base.config import harness_config
from tasks import beacon
from tasks.models import Task
from tasks.services import task_settle_killed_horse
from tasks.spec import spec_agent_kind

# The runner of each agent kind besides the harness's own loop, imported by the first job of
# that kind (or by the worker before its first job, HARNESS_WORKER_PRELOAD): each brings an
# SDK that takes seconds to import, which a worker running none of its tasks never pays.
AGENT_RUNNERS = {
    "langgraph": "agent.graph_runner:graph_task_run",
    "pydantic-ai": "agent.pydantic_ai_runner:pydantic_ai_task_run",
    "openai-agents": "agent.openai_agents_runner:openai_agents_task_run",
}
# The harness.yaml registry that names the agents of each kind.
AGENT_REGISTRIES = {
    "langgraph": "langgraph_graphs",
    "pydantic-ai": "pydantic_ai_agents",
    "openai-agents": "openai_agents",
}


def agent_runner(kind: str) -> Callable[..., str]:
    return object_at(AGENT_RUNNERS[kind])


def preloaded_agent_kinds() -> list[str]:
    """HARNESS_WORKER_PRELOAD read: `registered` (the default) is every kind harness.yaml
    registers an agent of; `none` is none; otherwise the kinds named."""
    wanted = [v.strip() for v in settings.HARNESS_WORKER_PRELOAD if v.strip()]
    if wanted == ["registered"]:
        config = harness_config()
        return [kind for kind, key in AGENT_REGISTRIES.items() if getattr(config, key)]
    if wanted in ([], ["none"]):
        return []
    unknown = [kind for kind in wanted if kind not in AGENT_RUNNERS]
    if unknown:
        raise ImproperlyConfigured(
            f"HARNESS_WORKER_PRELOAD: unknown agent kind {', '.join(unknown)} (expected "
            f"registered, none, or some of {', '.join(AGENT_RUNNERS)})"
        )
    return wanted


def agent_runners_preload() -> list[str]:
    kinds = preloaded_agent_kinds()
    for kind in kinds:
        agent_runner(kind)
    return kinds


def run_task(task_id: str) -> str:
    # A task runs the harness's own loop, an operator-registered LangGraph graph, or an
    # operator-registered agent of another SDK (Pydantic AI, the OpenAI Agents SDK).
    # A task whose head a newer harness wrote is left to a newer worker (agent.handback).
    # This thread runs the task; it promises nothing yet: importing an operator's graph or
    # agent takes as long as it takes (seconds on a loaded host), and the run's first bounded
    # phase (a workspace restore, a model call, a super-step) makes the first promise.
    beacon.claim()
    try:
        spec, status, head_version = Task.objects.filter(id=task_id).values_list(
            "spec", "status", "head_checkpoint__versions__harness__version"
        ).first() or (None, "", None)
        kind = spec_agent_kind(spec)
        if kind == "langgraph":
            head_version = graph_head_version(task_id=task_id)
        if task_hand_back_if_newer(
            task_id=task_id,
            status=status,
            head_version=str(head_version or ""),
            worker=worker_identity(),
        ):
            return HANDED_BACK
        if kind is None:
            return task_run(task_id=task_id)
        return agent_runner(kind)(task_id=task_id)
    except JobTimeoutException:
        # The job's hard timeout (tasks.services.task_job_timeout_s) reached the loop itself.
        job = get_current_job()
        task_settle_killed_horse(
            task_id=task_id,
            worker_id=worker_identity(),
            timed_out_s=float(job.timeout) if job is not None and job.timeout else 0.0,
        )
        raise
