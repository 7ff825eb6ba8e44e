"""Bulk actions act only for those who may operate: a viewer or a creator (who may create tasks
and cancel none, their own included) cannot cancel or retry anybody's tasks through the task
list's bulk form, "retry all in this group" on the failures page, or the API's per-task
actions; for an operator each task succeeds or is skipped on its own, with the reason."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages

from tasks.models import AuditEntry, Task
from tasks.services import task_transition
from tests.conftest import ApiClient, page_client
from tests.factories import TaskFactory

pytestmark = pytest.mark.django_db


def queued_task(title: str, user) -> Task:
    task = TaskFactory(title=title, created_by=user)
    return task_transition(task_id=task.id, to="queued")


@pytest.fixture
def others_tasks(operator):
    """A queued task and a failed one, both the operator's."""
    queued = queued_task("queued", operator)
    failed = TaskFactory(title="failed", created_by=operator, status="failed", error_class="x")
    return [queued, failed]


def unchanged(tasks: list[Task]) -> bool:
    return (
        all(
            Task.objects.filter(pk=t.pk, status=t.status, cancel_requested=False).exists()
            for t in tasks
        )
        and not AuditEntry.objects.filter(task__in=tasks).exists()
    )


@pytest.mark.parametrize("who", ["viewer", "creator"])
@pytest.mark.parametrize("action", ["cancel", "retry"])
@pytest.mark.parametrize("select", ["ids", "matching"])
def test_bulk_actions_are_refused_to_those_who_may_not_operate(
    request, others_tasks, who, action, select
):
    user = request.getfixturevalue(who)
    mine = queued_task("mine", user)
    tasks = [*others_tasks, mine]
    form = {"action": action, "select": select, "confirmed": "on", "next": "/tasks/"}
    if select == "ids":
        form["ids"] = [str(t.id) for t in tasks]
    response = page_client(user).post("/tasks/bulk/", form)
    assert response.status_code == 403
    assert unchanged(tasks)


@pytest.mark.parametrize("who", ["viewer", "creator"])
def test_retry_all_in_a_failure_group_is_refused_to_those_who_may_not_operate(
    request, others_tasks, who
):
    user = request.getfixturevalue(who)
    form = {
        "action": "retry",
        "select": "matching",
        "status": "failed",
        "fingerprint": "",
        "confirmed": "on",
        "next": "/tasks/?status=failed",
    }
    response = page_client(user).post("/tasks/bulk/", form)
    assert response.status_code == 403
    assert unchanged(others_tasks)


@pytest.mark.parametrize("action", ["cancel", "retry"])
def test_a_creator_cannot_operate_even_their_own_task_over_the_api(creator, action):
    mine = queued_task("mine", creator)
    response = ApiClient(creator).post(f"/api/v1/tasks/{mine.id}/{action}")
    assert response.status_code == 403
    assert unchanged([mine])


def test_an_operators_bulk_cancel_reports_each_task_on_its_own(operator, others_tasks):
    queued, failed = others_tasks
    gone = "00000000-0000-0000-0000-000000000000"
    client = page_client(operator)
    form = {
        "action": "cancel",
        "select": "ids",
        "confirmed": "on",
        "ids": [str(queued.id), str(failed.id), gone],
        "next": "/tasks/",
    }
    response = client.post("/tasks/bulk/", form)
    assert response.status_code == 302
    said = [str(m) for m in get_messages(response.wsgi_request)]
    assert said == ["Cancel: 1 done, 1 skipped", f"{failed.id}: task is already failed"]
    assert Task.objects.get(pk=queued.pk).status == "canceled"
    assert Task.objects.get(pk=failed.pk).status == "failed"
