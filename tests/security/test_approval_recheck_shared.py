"""The approval-drift attack through a group's shared directory (issue 24): while one agent's
write to a `/shared/` path waits for review, a sibling agent writes the same path. Approving
the first review must not silently overwrite the sibling's file with a diff computed against
a state that is gone. Real rqworkers, a real multi-agent group."""

from __future__ import annotations

import pytest

from review.models import ReviewRequest
from tasks.models import Task
from tests.conftest import wait_for
from tests.durable.conftest import (  # noqa: F401
    TEST_CONFIG,
    durable_settings,
    fleet,
)
from tests.multiagent.conftest import agent, delegate, group_spec

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SHARED_CONF = "/shared/service.conf"


@pytest.fixture
def harness_config_text() -> str:
    return (
        TEST_CONFIG
        + "review_rules:\n"
        + '  - {name: protected-config, tool: write_file, path_glob: "**/*.conf", action: review}\n'
    )


def writer(content: str) -> dict:
    return agent(
        {"call": "write_file", "args": {"path": SHARED_CONF, "content": content}},
        {"final": "written"},
        tools=["write_file"],
    )


def pending_of(root_id: str, agent_name: str) -> ReviewRequest:
    return ReviewRequest.objects.get(
        task__parent_id=root_id, task__agent_name=agent_name, status="pending"
    )


def test_a_shared_file_a_sibling_wrote_while_the_review_waited_is_not_overwritten(
    fleet,  # noqa: F811 (the durable fleet fixture, imported above)
    task_api,
    api_client,
    operator,
):
    fleet.worker(2)
    root = task_api.create(
        group_spec(
            {"calls": [delegate("editor", "edit"), delegate("sibling", "edit")]},
            {"final": "both done"},
            agents={"editor": writer("owner=editor\n"), "sibling": writer("owner=sibling\n")},
            shared=True,
        )
    )
    wait_for(
        lambda: (
            ReviewRequest.objects.filter(task__parent_id=root["id"], status="pending").count() == 2
        ),
        90,
        message="both sub-agents to wait for review",
    )
    editor_review = pending_of(root["id"], "editor")
    sibling_review = pending_of(root["id"], "sibling")
    sibling = Task.objects.get(pk=sibling_review.task_id)
    shared = sibling.workspace_path.parent / "shared" / root["id"] / "service.conf"

    # The sibling's write is approved and lands while the editor's review waits.
    assert api_client(operator).decide(sibling_review.id, decision="approve").status_code == 200
    wait_for(
        lambda: Task.objects.get(pk=sibling.pk).status == "succeeded", 90, message="the sibling"
    )
    assert shared.read_text() == "owner=sibling\n"

    response = api_client(operator).decide(editor_review.id, decision="approve")

    assert response.status_code == 409, response.content
    assert response.json()["reason"] == "target_changed"
    assert f"{SHARED_CONF} was created" in response.json()["detail"]
    assert shared.read_text() == "owner=sibling\n"
    new = ReviewRequest.objects.get(pk=response.json()["review_id"])
    assert "-owner=sibling" in new.preview and "+owner=editor" in new.preview
    # Approving the state it now shows runs the write.
    assert api_client(operator).decide(new.id, decision="approve").status_code == 200
    task_api.wait(root["id"], "succeeded", timeout=90)
    assert shared.read_text() == "owner=editor\n"
