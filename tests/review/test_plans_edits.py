"""An edited plan item (issue #46): the decision previews the edited call against the
workspace as it is then, the plan API and the plan review page show that preview beside the
planned one, and the execution run makes the edited call without another review while its
targets are as the decision saw them. (A changed target: tests/security/test_plan_binding.py.)"""

from __future__ import annotations

import pytest

from review.models import ReviewRequest
from tasks.models import Task
from tests.conftest import page_client
from tests.factories import run_in_process
from tests.review.test_plans import plan_task, planned

pytestmark = pytest.mark.django_db

EDIT = {"path": "e.txt", "content": "edited\n"}


def approve_with_item_4_edited(client, task: Task) -> ReviewRequest:
    review = planned(task)
    plan_hash = client.get(f"/api/v1/reviews/{review.id}").json()["plan_hash"]
    response = client.post(
        f"/api/v1/reviews/{review.id}/decision",
        {
            "decision": "approve",
            "plan_hash": plan_hash,
            "items": {"4": {"decision": "edit", "arguments": EDIT}},
        },
    )
    assert response.status_code == 200, response.content
    return review


def test_an_edited_item_shows_the_edited_calls_preview_and_runs_it(api_client, operator):
    task = plan_task(workspace={"files": {"e.txt": "old\n"}})
    client = api_client(operator)
    review = approve_with_item_4_edited(client, task)
    item = client.get(f"/api/v1/tasks/{task.id}/plan").json()["items"][3]
    # The planned preview stays; the edit's is of the edited call on the real workspace.
    assert "+gamma" in item["preview"] and "e.txt" not in item["preview"]
    assert "-old" in item["edited_preview"] and "+edited" in item["edited_preview"]
    assert item["decision"] == {"decision": "edit", "arguments": EDIT}
    unedited = client.get(f"/api/v1/tasks/{task.id}/plan").json()["items"][0]
    assert unedited["edited_preview"] == ""
    page = page_client(operator).get(f"/reviews/{review.id}/").content.decode()
    assert 'data-testid="plan-item-edited-preview"' in page and "+edited" in page
    assert run_in_process(task) == "succeeded"
    assert (task.workspace_path / "e.txt").read_text() == "edited\n"
    assert not (task.workspace_path / "c.txt").exists()
    assert ReviewRequest.objects.filter(task=task).count() == 1
    assert client.get(f"/api/v1/tasks/{task.id}/plan").json()["items"][3]["state"] == "executed"
