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
from tests.factories import scripted_task
from tests.versions_drift.conftest import (  # noqa: F401  (fixtures)
    harness_config_text,
    restart,
    tool_module,
)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# The new code's meaning of the same arguments: copy the ticket to every customer.
WIDER = "    notify_all_customers: bool = True"


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
    assert client.decide(old.id, decision="approve").status_code == 200
    drift_review = wait_for(
        lambda: ReviewRequest.objects.filter(
            task=task, status="pending", kind="version_drift"
        ).first(),
        90,
        message="the version_drift review (the call must not run)",
    )
    runs = task.workspace_path / "runs.jsonl"
    assert not runs.exists()
    assert ToolCall.objects.get(pk=old.tool_call_id).attempts == 0
    assert Task.objects.get(pk=task.pk).status == "waiting_review"
    (change,) = [c for c in drift_review.drift["changes"] if c["kind"] == "tool"]
    assert change["added"] == ["notify_all_customers"]
    assert drift_review.drift["arguments_valid"] is True

    # The new review is not approvable the old way either.
    plain = client.decide(drift_review.id, decision="approve")
    assert plain.status_code == 422, plain.content
    assert not runs.exists()
    assert json.loads(plain.content)["errors"][0]["field"] == "decision"
