"""Code deployed while work waits is never trusted with an approval given under other code
(THREATS: "code deployed while work waits"; issue #43). A user tool's call waits for review;
a deploy gives its argument model a new field with a default that changes what the call does
(the old arguments still validate, so nothing else would notice); the operator approves the
review they were shown. The call must not run: a `version_drift` review opens instead, and a
plain approval of that one is refused too. Real rqworkers, PostgreSQL and Redis."""

from __future__ import annotations

import json

import pytest

from review.models import ReviewRequest
from tasks.models import Task, ToolCall
from tests.conftest import wait_for
from tests.factories import scripted_task, spec_task
from tests.versions_drift.conftest import (  # noqa: F401  (fixtures)
    DRIFT_CONFIG,
    restart,
    tool_module,
)
from tests.versions_drift.sdk_agents import agent_module, sdk_spec  # noqa: F401  (fixture)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# The new code's meaning of the same arguments: copy the ticket to every customer.
WIDER = "    notify_all_customers: bool = True"


def approved_after_the_deploy(client, task: Task, old: ReviewRequest) -> ReviewRequest:
    """The old review approved: the worker opens a version_drift review and runs nothing
    (fails as soon as the call runs or the task ends instead)."""
    assert client.decide(old.id, decision="approve").status_code == 200
    runs = task.workspace_path / "runs.jsonl"

    def settled() -> ReviewRequest | str | None:
        if runs.exists():
            return "the call ran: " + runs.read_text()
        status = Task.objects.values_list("status", flat=True).get(pk=task.pk)
        if status in ("succeeded", "failed", "canceled"):
            return f"the task {status} without a version_drift review"
        return ReviewRequest.objects.filter(
            task=task, status="pending", kind="version_drift"
        ).first()

    drift_review = wait_for(settled, 90, message="the version_drift review")
    assert isinstance(drift_review, ReviewRequest), drift_review
    assert not runs.exists()
    assert ToolCall.objects.get(pk=old.tool_call_id).attempts == 0
    assert Task.objects.get(pk=task.pk).status == "waiting_review"
    return drift_review


def test_an_approval_given_before_a_schema_change_never_runs_the_call(
    fleet,
    tool_module,  # noqa: F811  (the fixture imported above)
    operator,
    api_client,
):
    fleet.worker(1)
    task = scripted_task(
        [{"call": tool_module.tool, "args": {"title": "API down"}}, {"final": "filed"}],
        [tool_module.tool],
        user=operator,
        enqueue=True,
    )
    old = wait_for(
        lambda: ReviewRequest.objects.filter(task=task, status="pending").first(),
        90,
        message="the review",
    )
    restart(fleet, lambda: tool_module.write(extra=WIDER))

    client = api_client(operator)
    drift_review = approved_after_the_deploy(client, task, old)
    runs = task.workspace_path / "runs.jsonl"
    (change,) = [c for c in drift_review.drift["changes"] if c["kind"] == "tool"]
    assert change["added"] == ["notify_all_customers"]
    assert drift_review.drift["arguments_valid"] is True

    # The new review is not approvable the old way either.
    plain = client.decide(drift_review.id, decision="approve")
    assert plain.status_code == 422, plain.content
    assert not runs.exists()
    assert json.loads(plain.content)["errors"][0]["field"] == "decision"


# The same for an SDK agent's call (Pydantic AI, OpenAI Agents SDK): the agent's tool gains
# the same widening field while its call waits; the SDK would fill in the default and run it.
@pytest.fixture
def harness_config_text(agent_module) -> str:  # noqa: F811  (the fixture imported above)
    """The drift tests' harness.yaml, with the SDK agents registered (for every test here)."""
    return agent_module.config(DRIFT_CONFIG)


@pytest.mark.parametrize("kind", ["pydantic-ai", "openai-agents"])
def test_an_sdk_approval_given_before_the_agent_changed_never_runs_the_call(
    kind,
    fleet,
    agent_module,  # noqa: F811  (the fixture imported above)
    operator,
    api_client,
):
    fleet.worker(1)
    task = spec_task(sdk_spec(kind), user=operator, enqueue=True)
    old = wait_for(
        lambda: ReviewRequest.objects.filter(task=task, status="pending", kind=kind).first(),
        90,
        message="the review",
    )
    restart(fleet, lambda: agent_module.write(params=", notify_all_customers: bool = True"))

    client = api_client(operator)
    drift_review = approved_after_the_deploy(client, task, old)
    runs = task.workspace_path / "runs.jsonl"
    assert drift_review.tool_call_id == old.tool_call_id
    (change,) = [c for c in drift_review.drift["changes"] if c["kind"] == "tool"]
    assert change["added"] == ["notify_all_customers"]
    assert "the agent's definition changed" in drift_review.drift["touches"]

    plain = client.decide(drift_review.id, decision="approve")
    assert plain.status_code == 422, plain.content
    assert not runs.exists()
