"""Mixed versions in a rolling deploy (issue #43 item 4), with real rqworkers: a worker whose
harness is older than the one that wrote a task's head checkpoint does not run the task - it
hands it back, saying so once in the task's events - and a current worker runs it. /ops/ and
its API show each worker's version."""

from __future__ import annotations

import socket

import pytest

from checkpoints.versions import checkpoint_versions
from tasks.models import Task, TaskEvent, ToolCall
from tests.conftest import ApiClient, approve, wait_for
from tests.durable.conftest import wait_status

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

NEW = "0.2.0"


def handed_back(task_id) -> list[dict]:
    return list(
        TaskEvent.objects.filter(task_id=task_id, type="version_handed_back").values_list(
            "payload", flat=True
        )
    )


def test_an_older_worker_hands_the_task_back_and_a_current_one_runs_it(
    worker_pool, paused_review, operator, viewer, as_user, settings
):
    # The task paused under the new release: its head checkpoint says 0.2.0.
    settings.HARNESS_VERSION = NEW
    review = paused_review()
    task = review.task
    assert checkpoint_versions(task_id=task.id)["harness"]["version"] == NEW

    # Only an old worker is up (pyproject's 0.1.0) when the operator approves.
    [old] = worker_pool.start(1)
    approve(review, operator)
    events = wait_for(lambda: handed_back(task.id), 60, message="the old worker's hand-back")
    assert events[0]["head_version"] == NEW
    assert events[0]["worker_version"] == "0.1.0"
    assert events[0]["worker"]
    assert Task.objects.get(id=task.id).status == "queued"
    assert (task.workspace_path / "old.log").exists()  # the approved delete did not run
    assert ToolCall.objects.get(pk=review.tool_call_id).status == "approved"

    # The new release's worker joins the same queues and runs it; the old one stays up.
    worker_pool.env["HARNESS_VERSION"] = NEW
    [new] = worker_pool.start(1)
    done = wait_status(task.id, "succeeded", timeout=90)
    assert not (done.workspace_path / "old.log").exists()
    call = ToolCall.objects.get(pk=review.tool_call_id)
    assert call.status == "succeeded" and call.attempts == 1
    assert checkpoint_versions(task_id=task.id)["harness"]["version"] == NEW
    # Said once, however often the old worker met the task again.
    assert len(handed_back(task.id)) == 1

    host = socket.gethostname()
    shown = {w["name"]: w for w in ApiClient(viewer).get("/api/v1/ops/workers").json()}
    assert shown[f"{host}:{old.pid}"]["version"] == "0.1.0"
    assert shown[f"{host}:{new.pid}"]["version"] == NEW
    ops = as_user(viewer).get("/ops/").content.decode()
    assert f'data-testid="worker-version-{host}:{new.pid}">{NEW}' in ops
