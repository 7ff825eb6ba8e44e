"""The role checks every API request makes (tasks.selectors.access) settle the usual roles on the
user's group names, read once a request: a creator's or operator's check reads no permissions
(two more queries each, a quarter of the server's time on `POST /api/v1/tasks`)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User

from tasks.selectors import user_can_create, user_can_operate
from tests.factories import UserFactory


@pytest.mark.parametrize("check", [user_can_create, user_can_operate])
def test_an_operators_role_check_is_one_query(check, operator, django_assert_num_queries):
    user = User.objects.get(pk=operator.pk)  # a request's user: nothing cached on it yet
    with django_assert_num_queries(1):
        assert check(user) and check(user)


def test_a_permission_without_the_group_still_creates(roles):
    viewer = UserFactory(username="viewer-with-add", roles=["viewers"])
    viewer.user_permissions.add(Permission.objects.get(codename="add_task"))
    user = User.objects.get(pk=viewer.pk)
    assert user_can_create(user)
    assert not user_can_operate(user)
