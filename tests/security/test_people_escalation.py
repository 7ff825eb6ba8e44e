"""/people/ attacked: nobody without the right reaches it, nobody raises their own rights or
touches a superuser without being one, the last admin stays, a role the provider maps is not
changed here, every POST needs the CSRF token, and a deactivated person's API token and
session stop working at once."""

from __future__ import annotations

import threading

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client

from accounts.backends import OidcBackend
from accounts.config import OidcConfig
from accounts.flows import people as people_flows
from accounts.flows.oidc_login import oidc_login_complete
from tasks.models import AuditEntry
from tasks.services import api_token_create
from tests.conftest import ApiClient, page_client, run_in_threads
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

SSO = OidcConfig(
    issuer="https://idp.example.com",
    client_id="harness",
    client_secret="s3cret",
    group_map={"idp-ops": "operators", "idp-read": "viewers"},
)


def fresh(user):
    return get_user_model().objects.get(pk=user.pk)


def role_groups(user) -> set[str]:
    return set(fresh(user).groups.values_list("name", flat=True))


@pytest.fixture
def boss(roles):
    return UserFactory(username="boss", roles=["operators"], is_staff=True)


@pytest.fixture
def staff_creator(roles):
    """The admin flag without the operator role: no people management."""
    return UserFactory(username="staffcreator", roles=["creators"], is_staff=True)


@pytest.mark.parametrize("who", ["operator", "creator", "viewer", "outsider", "staff_creator"])
def test_nobody_but_admins_invites_changes_roles_or_deactivates(request, who, viewer, boss):
    actor = request.getfixturevalue(who)
    client = page_client(actor)

    assert client.get("/people/").status_code == 403
    assert (
        client.post(
            "/people/invite/",
            {"username": "mole", "role": "operators", "admin": "on", "sign_in": "password"},
        ).status_code
        == 403
    )
    assert (
        client.post(f"/people/{actor.pk}/role/", {"role": "operators", "admin": "on"}).status_code
        == 403
    )
    assert client.post(f"/people/{boss.pk}/deactivate/").status_code == 403

    assert not get_user_model().objects.filter(username="mole").exists()
    assert not fresh(actor).is_staff or who == "staff_creator"
    assert fresh(boss).is_active
    assert not AuditEntry.objects.filter(action__startswith="person_").exists()


def test_an_admin_does_not_raise_their_own_role(roles, boss):
    # Manages people through the operate permission, holds only the viewer role.
    admin = UserFactory(username="perm-admin", roles=["viewers"], is_staff=True)
    admin.user_permissions.add(Permission.objects.get(codename="operate_task"))
    client = page_client(admin)

    response = client.post(f"/people/{admin.pk}/role/", {"role": "operators", "admin": "on"})

    assert response.status_code == 403
    assert b"role: nobody raises their own role" in response.content
    assert role_groups(admin) == {"viewers"}


def test_no_form_field_makes_a_superuser(boss, viewer):
    client = page_client(boss)
    client.post(f"/people/{viewer.pk}/role/", {"role": "viewers", "is_superuser": "on"})
    client.post(
        f"/people/{boss.pk}/role/", {"role": "operators", "admin": "on", "is_superuser": "on"}
    )
    client.post(
        "/people/invite/",
        {"username": "su2", "role": "viewers", "sign_in": "password", "is_superuser": "on"},
    )
    assert not get_user_model().objects.filter(is_superuser=True).exists()


def test_an_admin_does_not_change_or_deactivate_a_superuser(boss, admin_user):
    client = page_client(boss)
    assert client.post(f"/people/{admin_user.pk}/deactivate/").status_code == 403
    assert client.post(f"/people/{admin_user.pk}/role/", {"role": "viewers"}).status_code == 403
    assert fresh(admin_user).is_active and fresh(admin_user).is_staff


def test_the_last_admin_stays(boss, viewer):
    client = page_client(boss)

    demoted = client.post(f"/people/{boss.pk}/role/", {"role": "operators"})
    assert demoted.status_code == 409 and b"last active admin" in demoted.content
    assert (
        client.post(f"/people/{boss.pk}/role/", {"role": "viewers", "admin": "on"}).status_code
        == 409
    )
    assert client.post(f"/people/{boss.pk}/deactivate/").status_code == 409
    assert fresh(boss).is_active and fresh(boss).is_staff and role_groups(boss) == {"operators"}

    # With a second admin, the first may step down.
    client.post(f"/people/{viewer.pk}/role/", {"role": "operators", "admin": "on"})
    assert client.post(f"/people/{boss.pk}/deactivate/").status_code == 302
    assert not fresh(boss).is_active
    assert page_client(viewer).post(f"/people/{viewer.pk}/deactivate/").status_code == 409


@pytest.mark.django_db(transaction=True)
def test_two_admins_demoting_each_other_at_once_leave_one(roles, monkeypatch):
    first = UserFactory(username="first", roles=["operators"], is_staff=True)
    second = UserFactory(username="second", roles=["operators"], is_staff=True)
    # Each demotion waits at its last-admin check for the other to get there too: without the
    # admins' rows locked both get there, each still sees the other as an admin, and both
    # commit. With them locked the second waits for the first to commit, the barrier gives up
    # (this only costs the test its timeout) and the second check sees the first's demotion.
    barrier, guard = threading.Barrier(2, timeout=3), people_flows._last_admin_guard

    def meeting_guard(**kwargs):
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            pass
        guard(**kwargs)

    monkeypatch.setattr(people_flows, "_last_admin_guard", meeting_guard)
    outcomes = []

    def demote(by, target):
        def run():
            try:
                people_flows.person_role_set(
                    by=by, user_id=target.pk, role="operators", admin=False
                )
                outcomes.append("demoted")
            except people_flows.PeopleError as exc:
                outcomes.append(exc.status)

        return run

    run_in_threads(demote(first, second), demote(second, first))

    assert sorted(outcomes, key=str) == [409, "demoted"]
    assert [fresh(u).is_staff for u in (first, second)].count(True) == 1


def test_a_role_the_provider_maps_is_not_changed_here(boss, settings):
    settings.HARNESS_OIDC = SSO
    user = oidc_login_complete(config=SSO, claims={"sub": "s1", "groups": ["idp-read"]})

    response = page_client(boss).post(f"/people/{user.pk}/role/", {"role": "operators"})

    assert response.status_code == 403
    assert role_groups(user) == {"viewers"}


def test_every_people_post_needs_the_csrf_token(boss, viewer):
    client = Client(enforce_csrf_checks=True)
    client.force_login(boss)
    posts = [
        ("/people/invite/", {"username": "csrf", "role": "viewers", "sign_in": "password"}),
        (f"/people/{viewer.pk}/role/", {"role": "operators"}),
        (f"/people/{viewer.pk}/deactivate/", {}),
    ]
    for path, body in posts:
        assert client.post(path, body).status_code == 403, path
    assert role_groups(viewer) == {"viewers"} and fresh(viewer).is_active
    assert not get_user_model().objects.filter(username="csrf").exists()


def test_a_deactivated_persons_token_and_session_are_refused_at_once(boss, operator):
    token = api_token_create(user=operator)
    api = ApiClient()
    api.client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    session = page_client(operator)
    assert api.post("/api/v1/tasks/00000000-0000-0000-0000-000000000000/cancel").status_code == 404

    page_client(boss).post(f"/people/{operator.pk}/deactivate/")

    assert api.get("/api/v1/tasks").status_code == 401
    assert api.post("/api/v1/tasks/00000000-0000-0000-0000-000000000000/cancel").status_code == 401
    assert session.get("/tasks/").status_code == 302


def test_a_single_sign_on_session_of_a_deactivated_person_is_no_session(roles, settings):
    settings.HARNESS_OIDC = SSO
    user = oidc_login_complete(config=SSO, claims={"sub": "s2", "groups": ["idp-ops"]})
    assert OidcBackend().get_user(user.pk) == user
    get_user_model().objects.filter(pk=user.pk).update(is_active=False)
    assert OidcBackend().get_user(user.pk) is None
