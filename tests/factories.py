"""Factories for the rows tests need (factory-boy), and the scripted-model task specs most tests
run: `scripted_spec` builds the spec, `scripted_task` creates the task through the service,
`run_in_process` runs the real loop here, as a worker would.

    user = UserFactory(roles=["operators"])
    task = scripted_task([{"final": "done"}], ["write_file"], user=user)
    assert run_in_process(task) == "succeeded"
    row = TaskFactory(status="failed", created_at=yesterday)  # a row only, no loop
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import factory
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.utils import timezone

from agent.runtime import task_run
from review.models import ReviewRequest, ReviewRule
from tasks.models import Task, ToolCall
from tasks.services import task_create, task_transition
from tasks.spec import TaskSpec

PASSWORD = "correct horse battery staple"


# --- scripted tasks ---------------------------------------------------------------------------


def task_spec(model: dict[str, Any], tools: Sequence[str] = (), **extra: Any) -> dict[str, Any]:
    """A task spec for `model` with `tools`; `extra` adds or overrides spec keys."""
    return {"title": "t", "goal": "g", "model": model, "tools": list(tools), **extra}


def scripted_model(*turns: dict) -> dict[str, Any]:
    """The scripted model playing `turns`: `{"call": tool, "args": ...}` and a closing
    `{"final": answer}`."""
    return {"kind": "scripted", "script": list(turns)}


def scripted_spec(
    script: Sequence[dict], tools: Sequence[str] = (), **extra: Any
) -> dict[str, Any]:
    """A task spec whose model plays `script` (see `scripted_model`) with `tools`."""
    return task_spec(scripted_model(*script), tools, **extra)


FAMILY = ("parent", "parent_call_id", "agent_name")


def spec_task(spec: dict[str, Any], *, user=None, enqueue: bool = False, **family: Any) -> Task:
    """A task created from a spec dict the way the API does (validated, then `task_create`);
    `family` names a child task's parent, parent_call_id and agent_name."""
    return task_create(spec=TaskSpec.model_validate(spec), user=user, enqueue=enqueue, **family)


def scripted_task(
    script: Sequence[dict],
    tools: Sequence[str] = (),
    *,
    user=None,
    enqueue: bool = False,
    **extra: Any,
) -> Task:
    """A scripted task (see `scripted_spec`; `extra` are spec keys, or the `family` of
    `spec_task`), pending unless `enqueue` hands it to the queue."""
    family = {key: extra.pop(key) for key in FAMILY if key in extra}
    return spec_task(scripted_spec(script, tools, **extra), user=user, enqueue=enqueue, **family)


def enqueued_task(script: Sequence[dict], tools: Sequence[str] = (), **extra: Any) -> Task:
    """A scripted task on the queue, for real workers to run."""
    return scripted_task(script, tools, enqueue=True, **extra)


def queued_task(script: Sequence[dict], tools: Sequence[str] = (), **extra: Any) -> Task:
    """A scripted task moved to queued without a queue job (for in-process runs)."""
    task = scripted_task(script, tools, **extra)
    return task_transition(task_id=task.id, to="queued")


def graph_spec(graph: str, graph_input: dict | None = None, **extra: Any) -> dict[str, Any]:
    """A task spec that runs the registered LangGraph `graph` on `graph_input`."""
    return {
        "title": graph,
        "goal": "run a graph",
        "agent": {"kind": "langgraph", "graph": graph, "input": graph_input or {}},
        **extra,
    }


def graph_task(graph: str, graph_input: dict | None = None, **extra: Any) -> Task:
    """A LangGraph task (see `graph_spec`) on the queue, for real workers to run."""
    return spec_task(graph_spec(graph, graph_input, **extra), enqueue=True)


def run_in_process(task: Task) -> str:
    """Queue the task (unless it already is) and run the loop in this process, as a worker
    would; returns the run's outcome and refreshes `task`."""
    if Task.objects.values_list("status", flat=True).get(id=task.id) != "queued":
        task_transition(task_id=task.id, to="queued")
    outcome = task_run(task_id=task.id)
    task.refresh_from_db()
    return outcome


# --- rows -------------------------------------------------------------------------------------


class UserFactory(factory.django.DjangoModelFactory):
    """A user with the shared test password, in the named role groups
    (`roles=["operators"]`; the groups come from `harness_base.roles.roles_ensure`) and holding
    the named permissions (`permissions=["decide_review"]`)."""

    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password(PASSWORD)
    is_superuser = False
    is_staff = factory.LazyAttribute(lambda user: user.is_superuser)

    @factory.post_generation
    def roles(self, create: bool, names: Sequence[str] | None, **kwargs: Any) -> None:
        if create and names:
            from harness_base.roles import roles_ensure

            groups = roles_ensure()
            self.groups.add(*(groups[name] for name in names))

    @factory.post_generation
    def permissions(self, create: bool, codenames: Sequence[str] | None, **kwargs: Any) -> None:
        if create and codenames:
            self.user_permissions.add(*Permission.objects.filter(codename__in=codenames))


class TaskFactory(factory.django.DjangoModelFactory):
    """A task row with chosen fields (no loop), created by the operator unless told otherwise;
    `created_at` may be set (the column is stamped on insert, so it is written afterwards)."""

    class Meta:
        model = Task

    title = factory.Sequence(lambda n: f"task {n}")
    goal = "g"
    spec = factory.LazyFunction(dict)
    created_by = factory.SubFactory(UserFactory, username="operator", roles=["operators"])

    @classmethod
    def _create(cls, model_class, *args: Any, **kwargs: Any) -> Task:
        created_at = kwargs.pop("created_at", None)
        task = super()._create(model_class, *args, **kwargs)
        if created_at is not None:
            model_class.objects.filter(id=task.id).update(created_at=created_at)
            task.created_at = created_at
        return task


class ToolCallFactory(factory.django.DjangoModelFactory):
    """A tool call row, made five minutes ago unless `created_at` says otherwise."""

    class Meta:
        model = ToolCall

    task = factory.SubFactory(TaskFactory)
    call_id = factory.Sequence(lambda n: f"c{n}")
    tool = "write_file"
    created_at = factory.LazyFunction(lambda: timezone.now() - timedelta(minutes=5))


class ReviewRuleFactory(factory.django.DjangoModelFactory):
    """An admin review rule: review `write_file` calls unless told otherwise."""

    class Meta:
        model = ReviewRule

    name = factory.Sequence(lambda n: f"rule-{n}")
    tool = "write_file"
    action = "review"


class ReviewRequestFactory(factory.django.DjangoModelFactory):
    """A pending review of `tool_call` (rows only: no policy, no loop)."""

    class Meta:
        model = ReviewRequest

    tool_call = factory.SubFactory(ToolCallFactory, status="awaiting_review")
    task = factory.SelfAttribute("tool_call.task")
    tool = factory.SelfAttribute("tool_call.tool")
    risk = factory.SelfAttribute("tool_call.risk")
    original_arguments = factory.SelfAttribute("tool_call.arguments")
    requested_at = factory.LazyFunction(timezone.now)
