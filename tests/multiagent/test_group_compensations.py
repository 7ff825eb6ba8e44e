"""A group rollback previews the compensations of every agent (issue #44): each agent that
opened a ticket after the cut shows the `close_ticket` call that undoes it, on the API and the
page, on real workers."""

from __future__ import annotations

import json

import pytest

from tasks.models import ToolCall
from tests.conftest import page_client
from tests.multiagent.conftest import agent, all_sleeping, delegate, group_spec

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def ticketer(name: str) -> dict:
    """Writes a.txt, sleeps (the cut comes meanwhile), opens a ticket and answers."""
    return agent(
        {"call": "write_file", "args": {"path": "a.txt", "content": name}},
        {"call": "sleep", "args": {"seconds": 3}},
        {"call": "open_ticket", "args": {"title": f"{name} found a bug", "severity": 3}},
        {"final": f"{name} done"},
        tools=["write_file", "sleep", "open_ticket"],
    )


def test_the_group_preview_lists_every_agents_compensations(
    fleet, worker_pool, task_api, wait_for, operator, settings, tmp_path, monkeypatch
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
    children = wait_for(lambda: len(task_api.get(parent["id"])["children"]) == 2, 30)
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
    assert len(json.loads(tracker.read_text())["tickets"]) == 2

    preview = api.get(
        f"/api/v1/tasks/{parent['id']}/group-rollback/preview",
        {"global_checkpoint_id": cut["id"]},
    ).json()
    rows = {p["task_id"]: p for p in preview["participants"]}
    for child in children:
        opened = ToolCall.objects.get(task_id=child, tool="open_ticket")
        assert [
            (c["call_id"], c["tool"], c["arguments"]) for c in rows[child]["compensations"]
        ] == [(opened.call_id, "close_ticket", {"key": opened.result["key"]})]
        assert rows[child]["irreversible"] == []
    assert rows[parent["id"]]["compensations"] == []

    page = page_client(operator).get(
        f"/tasks/{parent['id']}/group-rollback/", {"global_checkpoint_id": cut["id"]}
    )
    text = page.content.decode()
    assert text.count('data-testid="group-rollback-effects"') == 2
    assert text.count("close_ticket") == 2
