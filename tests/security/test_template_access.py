"""A saved task template is its creator's alone (issue #45 item 3): it may hold their
workspace files and inputs, and starting it runs code as whoever starts it. Another person,
operators included, can neither list, read nor start it, and is told no more than for an id
that does not exist (404); a creator who lost the role to create uses none of their own."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from tasks.models import Task
from tests.conftest import ApiClient, page_client
from tests.factories import scripted_spec

pytestmark = pytest.mark.django_db

SPEC = {
    **scripted_spec([{"final": "ok"}]),
    "workspace": {"files": {"private.txt": "the creator's notes\n"}},
}


@pytest.fixture
def template(creator) -> dict:
    response = ApiClient(creator).post("/api/v1/templates", {"name": "mine", "spec": SPEC})
    assert response.status_code == 201
    return response.json()


@pytest.mark.parametrize("other", ["operator", "admin_user"])
def test_another_person_cannot_list_read_or_start_a_template(request, template, other):
    api = ApiClient(request.getfixturevalue(other))
    assert api.get("/api/v1/templates").json() == []
    read = api.get(f"/api/v1/templates/{template['id']}")
    assert read.status_code == 404
    assert "private.txt" not in read.content.decode()
    started = api.post(template["start_url"], {})
    assert started.status_code == 404
    assert not Task.objects.exists()


@pytest.mark.parametrize("other", ["operator", "admin_user"])
def test_another_persons_template_does_not_fill_the_new_task_page(request, template, other):
    page = page_client(request.getfixturevalue(other)).get(f"/tasks/new/?template={template['id']}")
    assert page.status_code == 404
    assert "private.txt" not in page.content.decode()


def test_a_creator_who_lost_the_role_uses_none_of_their_templates(creator, template):
    creator.groups.set([Group.objects.get(name="viewers")])
    api = ApiClient(creator)
    assert api.get(f"/api/v1/templates/{template['id']}").status_code == 403
    assert api.post(template["start_url"], {}).status_code == 403
    assert not Task.objects.exists()
