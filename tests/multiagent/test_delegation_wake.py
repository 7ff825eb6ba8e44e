"""A parent that pauses for its children while one of them ends (run in this process): the
child's own wake finds the parent still running and wakes nobody, so the parent looks again
once its pause is committed (agent.runtime.delegation) instead of waiting for the sweep."""

from __future__ import annotations

import pytest

from agent.jobs import run_task
from multiagent import delegation
from tasks import services
from tasks.models import Task
from tests.multiagent.conftest import agent, delegate, group_spec

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_child_that_ends_while_its_parent_pauses_still_wakes_it(task_api, monkeypatch):
    created = task_api.create(
        group_spec(
            delegate("helper", "help"),
            {"final": "ok"},
            agents={"helper": agent({"final": "helped"})},
        )
    )
    assert run_task(created["id"]) == "paused"
    parent = Task.objects.get(id=created["id"])
    assert parent.status == "waiting_children"
    child = Task.objects.get(parent=parent)
    # The parent runs again before its child has ended (a resume, a redispatch)...
    services.task_transition(task_id=parent.id, to="queued", reason="resumed")
    read = delegation.delegation_children

    def child_ends_after_the_read(**kwargs):
        seen = read(**kwargs)
        # ...and the child ends right after the parent read it: its wake finds the parent
        # running, not waiting, and wakes nobody.
        Task.objects.filter(id=child.id).update(status="succeeded", result="helped")
        assert delegation.delegation_wake(parent_id=parent.id) is False
        return seen

    monkeypatch.setattr(delegation, "delegation_children", child_ends_after_the_read)
    assert run_task(parent.id) == "paused"
    monkeypatch.undo()

    parent.refresh_from_db()
    assert parent.status == "queued"  # woken by its own look after the pause
    assert run_task(parent.id) == "succeeded"
