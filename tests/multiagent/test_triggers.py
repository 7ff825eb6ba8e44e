"""The optional global checkpoint trigger `before_side_effects` (harness.yaml
multi_agent.global_checkpoints), on real workers."""

from __future__ import annotations

import pytest

from checkpoints.models import Checkpoint
from tasks.models import Task
from tests.durable.conftest import TEST_CONFIG
from tests.multiagent.conftest import agent, delegate, group_spec

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def harness_config_text() -> str:
    return TEST_CONFIG + (
        "multi_agent: {global_checkpoints: [children_finished, before_side_effects]}\n"
    )


def test_a_global_checkpoint_is_taken_before_the_parent_side_effects_once_it_delegated(
    fleet, task_api, api_client, viewer
):
    fleet.worker(2)
    done = task_api.run(
        group_spec(
            # No child yet: nothing to cut.
            {"call": "write_file", "args": {"path": "plan.txt", "content": "plan"}},
            delegate("scout", "look"),
            # Read-only: no cut.
            {"call": "read_file", "args": {"path": "plan.txt"}},
            {"call": "write_file", "args": {"path": "report.txt", "content": "report"}},
            {"final": "reported"},
            agents={"scout": agent({"final": "all quiet"})},
            tools=["write_file", "read_file"],
        ),
        timeout=90,
    )
    cuts = api_client(viewer).get(f"/api/v1/tasks/{done['id']}/global-checkpoints").json()
    assert [c["trigger"] for c in cuts] == ["children_finished", "before_side_effects"]
    before = {p["task_id"]: p for p in cuts[1]["participants"]}
    assert set(before) == {done["id"], *done["children"]}
    # The parent prepared at the call's boundary, before the file existed.
    parent_cut = Checkpoint.objects.get(id=before[done["id"]]["checkpoint_id"])
    assert parent_cut.trigger == "global_prepare"
    assert before[done["id"]]["status"] == "running"
    client = api_client(viewer)
    url = f"/api/v1/tasks/{done['id']}/group-rollback/preview"
    preview = client.get(url, {"global_checkpoint_id": cuts[1]["id"]}).json()
    parent_row = next(p for p in preview["participants"] if p["task_id"] == done["id"])
    assert parent_row["files_delete"] == ["report.txt"]
    # The call ran once, after the cut, and the parent was never held for it.
    parent = Task.objects.get(id=done["id"])
    assert parent.tool_calls.filter(tool="write_file").count() == 2
    assert not parent.events.filter(type="status", payload__to="prepared").exists()
