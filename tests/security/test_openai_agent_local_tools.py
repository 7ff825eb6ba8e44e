"""An OpenAI Agents SDK agent's tools that the SDK runs in the worker's own process (a local
shell, a computer, a patch editor, a custom tool) would run model-chosen operations outside the
task's sandbox, gate and ledger (THREATS.md: a model's call is hostile). Such an agent, or one
that can hand off to such an agent, is refused before its model is asked: the task fails
`local_tool_refused` naming the tool and the agent, and the tool never ran. The task runs in
this process (the RQ job function)."""

from __future__ import annotations

import uuid

import pytest

from agent.jobs import run_task
from tasks.models import Task, ToolCall
from tests.security import openai_local_agents

pytestmark = pytest.mark.django_db(transaction=True)

AGENTS = {
    "shell": "'local_shell' (LocalShellTool)",
    "shell_in_handoff": "(LocalShellTool) of agent 'shell_in_handoff-inner'",
    "local_shell": "'shell' (ShellTool)",
    "computer": "(ComputerTool)",
    "patcher": "'apply_patch' (ApplyPatchTool)",
    "custom": "'free_text' (CustomTool)",
}


@pytest.fixture(autouse=True)
def _config(harness_dirs, harness_yaml, quiet_watchdog):
    harness_yaml(
        "openai_agents:\n"
        + "".join(f'  {name}: "tests.security.openai_local_agents:{name}"\n' for name in AGENTS)
    )


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_an_agent_with_a_tool_the_sdk_runs_locally_is_refused_before_it_runs(task_api, name):
    openai_local_agents.EXECUTED.clear()
    task = task_api.create(
        {
            "title": name,
            "goal": f"task {uuid.uuid4().hex}: run it",
            "agent": {"kind": "openai-agents", "name": name},
        }
    )
    run_task(task["id"])
    task = Task.objects.get(id=task["id"])
    assert task.status == "failed", (task.status, task.error_message)
    assert task.error_class == "local_tool_refused"
    assert AGENTS[name] in task.error_message, task.error_message
    assert "outside the task's sandbox" in task.error_message
    assert openai_local_agents.EXECUTED == []
    assert not ToolCall.objects.filter(task=task).exists()
