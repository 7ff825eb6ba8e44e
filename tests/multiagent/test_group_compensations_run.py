"""A group rollback runs the compensations of every agent (issue #44): each agent that opened a
ticket after the cut closes it, under a key derived from its own call's, before it goes on."""

from __future__ import annotations

import json

import pytest

from tasks.models import ToolCall
from tests.multiagent.conftest import all_sleeping, delegate, group_spec
from tests.multiagent.test_group_compensations import ticketer

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_a_group_rollback_closes_every_agents_ticket(
    fleet, worker_pool, task_api, wait_for, settings, tmp_path, monkeypatch
):
    tracker = tmp_path / "tracker.json"
    settings.HARNESS_TOOL_MODULES = ["examples.ticket_tools"]
    monkeypatch.setenv("HARNESS_EXAMPLE_TRACKER", str(tracker))
    worker_pool.env.update(
        HARNESS_TOOL_MODULES="examples.ticket_tools", HARNESS_EXAMPLE_TRACKER=str(tracker)
    )
    fleet.worker(3)
    parent = task_api.create(
        group_spec(
            {"calls": [delegate("left", "look"), delegate("right", "look")]},
            {"final": "reported"},
            agents={"left": ticketer("left"), "right": ticketer("right")},
        )
    )
    api = task_api.client
    wait_for(lambda: len(task_api.get(parent["id"])["children"]) == 2, 30)
    children = task_api.get(parent["id"])["children"]
    wait_for(lambda: all_sleeping(children), 30, message="both children to start sleeping")
    response = api.post(f"/api/v1/tasks/{parent['id']}/global-checkpoints", {"reason": "cut"})
    assert response.status_code == 202, response.content
    task_api.wait(parent["id"], "succeeded", timeout=90)
    cut = next(
        c
        for c in api.get(f"/api/v1/tasks/{parent['id']}/global-checkpoints").json()
        if c["trigger"] == "manual"
    )
    opened = {child: ToolCall.objects.get(task_id=child, tool="open_ticket") for child in children}

    response = api.post(
        f"/api/v1/tasks/{parent['id']}/group-rollback",
        {"global_checkpoint_id": cut["id"], "resume": True, "reason": "wrong component"},
    )
    assert response.status_code == 200, response.content
    task_api.wait(parent["id"], "succeeded", timeout=120)

    tickets = {t["key"]: t for t in json.loads(tracker.read_text())["tickets"]}
    for child, call in opened.items():
        ticket = tickets[call.result["key"]]
        assert ticket["status"] == "closed"
        assert ticket["closed_by"] == f"{child}:{call.call_id}~undo"
        (undo,) = ToolCall.objects.filter(task_id=child, tool="close_ticket")
        assert (undo.call_id, undo.status) == (f"{call.call_id}~undo", "succeeded")
