"""The job's hard timeout (RQ's JobTimeoutException, raised into the job's thread wherever the
run is) ends the task `failed` with error class `timeout` (layer: job), as agent.jobs settles
it: the run's own ladder does not take it for the loop's or the agent's error."""

from __future__ import annotations

import pytest
from rq.timeouts import JobTimeoutException

from agent.jobs import run_task
from agent.sdk_run.base import RunBase
from tasks.models import Task
from tests.factories import queued_task

pytestmark = pytest.mark.django_db(transaction=True)


def _timed_out(*args, **kwargs):
    raise JobTimeoutException("Task exceeded maximum timeout value (3720 seconds)")


def _settled(task: Task) -> tuple[str, str, bool]:
    task.refresh_from_db()
    return task.status, task.error_class, "layer: job" in task.error_message


def test_the_harness_loop_hit_by_the_hard_timeout_fails_as_timeout(monkeypatch):
    task = queued_task([{"final": "never reached"}])
    monkeypatch.setattr("agent.runtime.loop.boundary_checks", _timed_out)
    with pytest.raises(JobTimeoutException):
        run_task(str(task.id))
    assert _settled(task) == ("failed", "timeout", True)


def test_an_sdk_agent_hit_by_the_hard_timeout_fails_as_timeout(task_api, monkeypatch):
    created = task_api.create(
        {
            "title": "release notes",
            "goal": "write the release notes",
            "agent": {"kind": "pydantic-ai", "name": "release_notes", "input": "faster search"},
        }
    )
    monkeypatch.setattr(RunBase, "boundary_checks", _timed_out)
    with pytest.raises(JobTimeoutException):
        run_task(created["id"])
    assert _settled(Task.objects.get(id=created["id"])) == ("failed", "timeout", True)
