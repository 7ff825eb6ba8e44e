"""How many durable writes (COMMITs of write transactions) each kind of step costs, counted on
the worker's connection while the loop runs in this process (issue 17): a read-only step is
one, a side-effecting step two (the checkpoint before the effect; the outcome with the
after-step checkpoint), model turn included; finishing is one; resuming after an approval
writes once before the tool runs. Taking the lease is a write of its own, before any of them."""

from __future__ import annotations

import dataclasses

import pytest

from agent.runtime import task_run
from review.models import ReviewRequest
from tasks.models import Task
from tasks.services import task_transition
from tasks.tools.registry import registry
from tests.conftest import approve
from tests.factories import scripted_task

from .commits import CommitCounter, count_commits
from .conftest import TEST_CONFIG

pytestmark = pytest.mark.django_db(transaction=True)

REVIEW_CONF = """
review_rules:
  - {name: conf, tool: write_file, path_glob: "**/*.conf", action: review, reason: "config"}
"""


@pytest.fixture
def harness_config_text() -> str:
    return TEST_CONFIG + REVIEW_CONF


class Counted:
    """Runs tasks in this process as a worker would, counting their commits; `effects` holds
    the number of commits so far each time a spied tool started."""

    def __init__(self) -> None:
        self.counter = CommitCounter()
        self.effects: list[int] = []

    def run(self, task: Task) -> str:
        if Task.objects.get(id=task.id).status != "queued":
            task_transition(task_id=task.id, to="queued")
        self.effects = []
        with count_commits() as self.counter:
            return task_run(task_id=task.id)


@pytest.fixture
def counted(monkeypatch) -> Counted:
    counted = Counted()

    def spy(name: str) -> None:
        spec = registry.get(name)

        def func(ctx, args):
            counted.effects.append(len(counted.counter))
            return spec.func(ctx, args)

        monkeypatch.setitem(registry._tools, name, dataclasses.replace(spec, func=func))

    for name in ("noop", "write_file"):
        spy(name)
    return counted


def steps(tool: str, n: int) -> list[dict]:
    """`n` steps of one call each; every `write_file` writes a new file (new content)."""
    return [
        {"call": tool, "args": {"path": f"notes/{i}.txt", "content": f"note {i}\n"}}
        if tool == "write_file"
        else {"call": tool, "args": {}}
        for i in range(n)
    ]


def run_script(counted: Counted, script: list[dict], tools: list[str]) -> CommitCounter:
    task = scripted_task([*script, {"final": "done"}], tools)
    assert counted.run(task) == "succeeded"
    print([commit.tables for commit in counted.counter.commits])
    return counted.counter


def between(effects: list[int]) -> list[int]:
    """Commits between one tool run and the next: one step's writes."""
    return [b - a for a, b in zip(effects, effects[1:], strict=False)]


def test_a_read_only_step_is_one_write(queue, counted):
    counter = run_script(counted, steps("noop", 3), ["noop"])
    # Each step writes once, before its tool runs (the previous step's end rides along).
    assert between(counted.effects) == [1, 1]
    # Finishing, which carries the last step's end.
    assert len(counter) - counted.effects[-1] == 1


def test_a_side_effecting_step_is_two_writes_one_before_the_effect(queue, counted):
    counter = run_script(counted, steps("write_file", 3), ["write_file"])
    # The outcome with the after-step checkpoint, then the next step's write before its effect.
    assert between(counted.effects) == [2, 2]
    assert len(counter) - counted.effects[-1] == 1 + 1


def test_finishing_is_one_write(queue, counted):
    counter = run_script(counted, [], [])
    # After the `task_start` write (the first to insert a checkpoint): the final answer's.
    started = next(i for i, c in enumerate(counter.commits) if "checkpoints_checkpoint" in c.tables)
    assert len(counter) - started - 1 == 1


def test_resuming_after_an_approval_writes_once_before_the_tool(queue, counted, operator):
    conf = {"call": "write_file", "args": {"path": "app.conf", "content": "v = 1\n"}}
    task = scripted_task([conf, {"final": "ok"}], ["write_file"])
    assert counted.run(task) == "paused"
    approve(ReviewRequest.objects.get(task=task), operator)
    assert counted.run(task) == "succeeded"
    print([commit.tables for commit in counted.counter.commits])
    # Taking the lease, then one write before the tool runs.
    assert counted.effects == [1 + 1]
