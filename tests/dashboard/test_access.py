"""Every page behind login; viewers see everything and change nothing; operators act."""

from __future__ import annotations

import pytest

from tests.factories import TaskFactory

pytestmark = pytest.mark.django_db

PAGES = [
    "/",
    "/tasks/",
    "/tasks/{task}/",
    "/tasks/{task}/?tab=calls",
    "/tasks/{task}/?tab=reviews",
    "/tasks/{task}/?tab=checkpoints",
    "/tasks/{task}/live/",
    "/tasks/{task}/events.json",
    "/stats/failures/",
    "/stats/failures/by_tool.csv",
    "/ops/",
    "/audit/",
]
ACTIONS = ["/tasks/{task}/cancel/", "/tasks/bulk/", "/ops/jobs/default/nojob/requeue/"]


@pytest.fixture
def task():
    return TaskFactory(status="queued")


def test_anonymous_is_sent_to_login_from_every_page(as_user, task):
    client = as_user(None)
    for page in PAGES:
        response = client.get(page.format(task=task.id))
        assert response.status_code == 302, page
        assert response["Location"].startswith("/accounts/login/"), page


@pytest.mark.parametrize("role", ["operator", "viewer"])
def test_every_role_can_read_every_page(request, as_user, task, role):
    client = as_user(request.getfixturevalue(role))
    for page in PAGES:
        assert client.get(page.format(task=task.id)).status_code == 200, page


@pytest.mark.parametrize("action", ACTIONS)
def test_a_viewer_posting_an_action_gets_403_and_nothing_changes(as_user, viewer, task, action):
    response = as_user(viewer).post(
        action.format(task=task.id), {"action": "cancel", "ids": [str(task.id)], "confirmed": "on"}
    )
    assert response.status_code == 403
    task.refresh_from_db()
    assert task.status == "queued"


@pytest.mark.parametrize("action", ACTIONS)
def test_anonymous_posting_an_action_is_sent_to_login(as_user, task, action):
    response = as_user(None).post(action.format(task=task.id), {"action": "cancel"})
    assert response.status_code == 302


@pytest.mark.parametrize(
    "page, marker",
    [
        ("/tasks/", 'data-testid="bulk-form"'),
        ("/tasks/{task}/", 'data-testid="cancel-button"'),
    ],
)
def test_viewers_see_no_action_buttons_operators_do(as_user, operator, viewer, task, page, marker):
    url = page.format(task=task.id)
    assert marker in as_user(operator).get(url).content.decode()
    assert marker not in as_user(viewer).get(url).content.decode()


def test_operator_cancels_from_the_task_page(as_user, operator, task):
    response = as_user(operator).post(f"/tasks/{task.id}/cancel/", {"reason": "no longer needed"})
    assert response.status_code == 302
    task.refresh_from_db()
    assert task.status == "canceled"
    entry = task.audit_entries.get()
    assert (entry.action, entry.actor_name, entry.reason) == (
        "cancel",
        "operator",
        "no longer needed",
    )


def test_django_rq_views_are_for_staff_only(as_user, operator, admin_user):
    assert as_user(operator).get("/django-rq/").status_code == 302
    assert as_user(admin_user).get("/django-rq/").status_code == 200
