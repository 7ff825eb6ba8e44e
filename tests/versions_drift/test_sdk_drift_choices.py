"""SDK agents' drift at pick-up (agent.sdk_drift), run in this process: drift that does not touch
what happens next (the policy) is an event and the approved call runs; after a changed agent
definition, `restart` runs the new agent from the chosen checkpoint (not stopped again for the
older code it chose), `cancel` cancels, and `migrate` is refused (409)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.jobs import run_task
from checkpoints.models import Checkpoint
from review.models import ReviewRequest, ReviewRule
from tasks.models import Task, TaskEvent, ToolCall
from tests.versions_drift.conftest import DRIFT_CONFIG, runs
from tests.versions_drift.sdk_agents import AgentModule, sdk_spec
from tests.versions_drift.test_drift_page import logged_in

pytestmark = pytest.mark.django_db(transaction=True)

SDKS = ["pydantic-ai", "openai-agents"]


@pytest.fixture
def module(tmp_path: Path, harness_yaml, harness_dirs, quiet_watchdog) -> Iterator[AgentModule]:
    root = tmp_path / "agentmods"
    root.mkdir()
    written = AgentModule(root)
    written.write()
    harness_yaml(written.config(DRIFT_CONFIG))
    sys.path.insert(0, str(root))
    try:
        yield written
    finally:
        sys.path.remove(str(root))
        sys.modules.pop(written.name, None)


def deploy(module: AgentModule, **change) -> None:
    """The new code: this process imports the rewritten module at the next pick-up."""
    module.write(**change)
    sys.modules.pop(module.name, None)


def paused(task_api, kind: str) -> tuple[Task, ReviewRequest]:
    task = task_api.create(sdk_spec(kind))
    assert run_task(task["id"]) == "paused"
    return Task.objects.get(pk=task["id"]), ReviewRequest.objects.get(task_id=task["id"])


def drift_review(task_api, api_client, operator, module, kind) -> tuple[Task, ReviewRequest]:
    task, old = paused(task_api, kind)
    deploy(module, instructions="File it twice, loudly.")
    assert api_client(operator).decide(old.id, decision="approve").status_code == 200
    assert run_task(task.id) == "paused"
    review = ReviewRequest.objects.get(task=task, kind="version_drift", status="pending")
    assert runs(task) == []
    return task, review


@pytest.mark.parametrize("kind", SDKS)
def test_a_policy_change_is_recorded_and_the_approved_call_runs(
    kind, module, task_api, api_client, operator
):
    task, old = paused(task_api, kind)
    ReviewRule.objects.create(name="wider", tool="shell", action="review")
    assert api_client(operator).decide(old.id, decision="approve").status_code == 200
    assert run_task(task.id) == "succeeded"
    assert runs(task) == [{"title": "API down"}]
    assert not ReviewRequest.objects.filter(task=task, kind="version_drift").exists()
    (event,) = TaskEvent.objects.filter(task=task, type="version_drift")
    assert event.payload["touches_next"] is False
    assert event.payload["changes"] == ["policy changed"]


@pytest.mark.parametrize("kind", SDKS)
def test_restart_runs_the_new_agent_from_the_chosen_checkpoint(
    kind, module, task_api, api_client, operator
):
    task, review = drift_review(task_api, api_client, operator, module, kind)
    # The page names what of the agent's definition changed.
    page = logged_in(operator).get(f"/reviews/{review.id}/").content.decode()
    assert 'data-testid="drift-parts"' in page and "instructions</code>" in page
    # It does not offer the migrate form the decision would refuse: it says why instead.
    assert 'data-testid="drift-migrate"' not in page
    assert 'data-testid="drift-migrate-refused"' in page and f"{kind} task" in page
    client = api_client(operator)
    assert client.decide(review.id, decision="migrate", migration="add-priority").status_code == 409
    first = Checkpoint.objects.filter(task=task).order_by("seq").first()
    response = client.decide(review.id, decision="restart", checkpoint_id=str(first.id))
    assert response.status_code == 200, response.content
    # The new agent runs from the start: it asks again for its call, under the new code.
    assert run_task(task.id) == "paused"
    again = ReviewRequest.objects.get(task=task, status="pending")
    assert again.kind == kind and again.tool_call_id != review.tool_call_id
    assert client.decide(again.id, decision="approve").status_code == 200
    assert run_task(task.id) == "succeeded"
    assert runs(task) == [{"title": "API down"}]
    assert ToolCall.objects.get(pk=review.tool_call_id).status == "rejected"


@pytest.mark.parametrize("kind", SDKS)
def test_cancel_cancels_and_runs_nothing(kind, module, task_api, api_client, operator):
    task, review = drift_review(task_api, api_client, operator, module, kind)
    response = api_client(operator).decide(review.id, decision="cancel", comment="not now")
    assert response.status_code == 200, response.content
    assert Task.objects.get(pk=task.pk).status == "canceled"
    assert runs(task) == []
