"""The group on the task page (agents, one lane per agent, global checkpoints) and the group
rollback page, on a group built through the services (no workers needed)."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from checkpoints.services import checkpoint_build
from checkpoints.snapshots import snapshot_capture
from multiagent import coordinator
from multiagent.shared import shared_path
from tasks.agent_state import AgentState
from tasks.models import Task
from tests.conftest import page_client
from tests.factories import scripted_task, spec_task
from tests.multiagent.conftest import agent, group_spec

pytestmark = pytest.mark.django_db


@pytest.fixture
def shared() -> bool:
    """Whether the group of `group` has a shared directory."""
    return False


@pytest.fixture
def group(harness_dirs, operator, shared):
    parent = spec_task(
        group_spec(
            {"final": "x"}, agents={"scout": agent({"final": "y"})}, title="survey", shared=shared
        ),
        user=operator,
    )
    child = scripted_task(
        [{"final": "y"}],
        title="survey / scout",
        user=operator,
        parent=parent,
        parent_call_id="0.1.0",
        agent_name="scout",
    )
    for task in (parent, child):
        task.workspace_path.mkdir(parents=True)
        (task.workspace_path / "notes.txt").write_text("at the cut")
        checkpoint = checkpoint_build(
            task_id=task.id,
            seq=0,
            state=AgentState(),
            level="task",
            trigger="task_start",
            snapshot=snapshot_capture(workspace=task.workspace_path),
            parent_id=None,
        )
        checkpoint.save(force_insert=True)
        Task.objects.filter(id=task.id).update(head_checkpoint=checkpoint, status="succeeded")
    if shared:
        folder = shared_path(root_id=parent.id)
        folder.mkdir(parents=True)
        (folder / "plan.md").write_text("the plan")
    cut = coordinator.round_start(root_id=parent.id, trigger="manual").global_checkpoint
    for task in (parent, child):
        (task.workspace_path / "notes.txt").write_text("after the cut")
    return parent, child, cut


def test_the_task_page_shows_the_agents_their_lanes_and_the_global_checkpoints(group, viewer):
    parent, child, cut = group
    client = page_client(viewer)
    page = client.get(f"/tasks/{parent.id}/").content.decode()
    assert 'data-testid="group-panel"' in page
    panel = client.get(f"/tasks/{parent.id}/group/").content.decode()
    assert "<code>scout</code>" in panel and f'data-child-id="{child.id}"' in panel
    assert 'data-global-seq="1"' in panel
    # A viewer reads, but is not offered the rollback.
    assert "group-rollback-link" not in panel
    lanes = json.loads(
        panel.split('id="group-lanes-data" type="application/json">')[1].split("</script>")[0]
    )
    assert set(lanes["layout"]["yaxis"]["categoryarray"]) == {
        f"parent · {str(parent.id)[:8]}",
        f"scout · {str(child.id)[:8]}",
    }
    marks = next(t for t in lanes["data"] if t["name"] == "global checkpoints")
    assert marks["customdata"] == [
        f"/tasks/{parent.id}/group-rollback/?global_checkpoint_id={cut.id}"
    ]
    child_panel = client.get(f"/tasks/{child.id}/group/").content.decode()
    assert 'data-testid="group-parent"' in child_panel and "survey" in child_panel


def test_an_operator_previews_and_rolls_the_group_back_from_the_page(group, operator, viewer):
    parent, child, cut = group
    url = f"/tasks/{parent.id}/group-rollback/?global_checkpoint_id={cut.id}"
    assert page_client(viewer).get(url).status_code == 403
    client = page_client(operator)
    preview = client.get(url).content.decode()
    assert 'data-testid="group-rollback-preview"' in preview and "notes.txt" in preview
    refused = client.post(url, {"global_checkpoint_id": str(cut.id), "reason": "", "then": "hold"})
    assert refused.status_code == 422
    done = client.post(url, {"global_checkpoint_id": str(cut.id), "reason": "undo", "then": "hold"})
    assert done.status_code == 302
    for task in (parent, child):
        assert (task.workspace_path / "notes.txt").read_text() == "at the cut"


def _family(user, children: int) -> Task:
    parent = spec_task(group_spec({"final": "x"}, agents={"a": agent({"final": "y"})}), user=user)
    for n in range(children):
        scripted_task(
            [{"final": "y"}],
            title="c",
            user=user,
            parent=parent,
            parent_call_id=f"0.{n}.0",
            agent_name="a",
        )
    return parent


def test_the_task_list_api_reads_every_task_children_in_one_query(
    operator, api_client, django_assert_max_num_queries
):
    client = api_client(operator)
    first = _family(operator, children=2)
    with CaptureQueriesContext(connection) as few:
        listed = client.get("/api/v1/tasks").json()
    for _ in range(6):
        _family(operator, children=3)
    with django_assert_max_num_queries(len(few.captured_queries)):
        listed = client.get("/api/v1/tasks").json()
    items = listed["items"] if isinstance(listed, dict) else listed
    by_id = {item["id"]: item for item in items}
    assert len(by_id[str(first.id)]["children"]) == 2
    assert sum(len(item["children"]) for item in items) == 2 + 6 * 3
    # Oldest child first, as on a single task.
    assert (
        by_id[str(first.id)]["children"]
        == client.get(f"/api/v1/tasks/{first.id}").json()["children"]
    )


@pytest.mark.parametrize("shared", [True])
def test_the_group_panel_lists_the_shared_directory_and_what_each_cut_holds(
    group, viewer, tmp_path
):
    parent, child, _cut = group
    folder = shared_path(root_id=parent.id)
    (folder / "later.md").write_text("after the cut")
    (folder / "link").symlink_to(tmp_path)
    panel = page_client(viewer).get(f"/tasks/{child.id}/group/").content.decode()
    listing = panel.split('data-testid="group-shared"')[1].split("</table>")[0]
    assert "/shared/plan.md" in listing and "/shared/later.md" in listing
    assert "link" not in listing
    row = panel.split('data-global-seq="1"')[1].split("</tr>")[0]
    assert "<td>1</td>" in row  # the cut holds one shared file


def test_a_group_without_a_shared_directory_shows_none(group, viewer):
    parent, _child, _cut = group
    panel = page_client(viewer).get(f"/tasks/{parent.id}/group/").content.decode()
    assert 'data-testid="group-shared"' not in panel
