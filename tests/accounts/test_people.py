"""/people/: the list, an invitation's one-time link (works once, expires, dies with the
account), role changes, deactivation, each audited; a role the provider maps stays its."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from accounts.flows.oidc_login import oidc_login_complete
from accounts.invites import InviteTokenGenerator
from accounts.models import SsoIdentity
from tasks.models import AuditEntry
from tasks.services import api_token_create
from tests.conftest import ApiClient, page_client
from tests.factories import PASSWORD, UserFactory

pytestmark = pytest.mark.django_db

NEW_PASSWORD = "a long new password 42"


def groups(user) -> set[str]:
    return set(get_user_model().objects.get(pk=user.pk).groups.values_list("name", flat=True))


def invite(client: Client, **fields) -> tuple[int, str]:
    """POST an invitation; (status, the one-time link's path or "")."""
    response = client.post("/people/invite/", {"role": "viewers", "sign_in": "password", **fields})
    link = response.context["invite_link"] if response.context else ""
    return response.status_code, link.removeprefix("http://testserver")


def test_the_list_shows_role_sign_in_last_login_and_api_tokens(boss, viewer):
    api_token_create(user=viewer)
    api_token_create(user=viewer)
    ApiClient(viewer).get("/api/v1/tasks")  # one more token, used now
    SsoIdentity.objects.create(user=boss, issuer="https://idp.example.com", subject="b1")

    page = page_client(boss).get("/people/").content.decode()

    row = page[page.index('data-testid="person-viewer"') :].split("</tr>")[0]
    assert '<span data-testid="person-role">viewer</span>' in row
    assert '<td data-testid="person-tokens">3</td>' in row
    assert "local" in row and "<time" in row  # the token's last use
    boss_row = page[page.index('data-testid="person-boss"') :].split("</tr>")[0]
    assert "SSO" in boss_row and 'data-testid="person-admin"' in boss_row


def test_an_invite_link_sets_the_password_once(boss):
    status, link = invite(page_client(boss), username="newbie", email="n@example.com")
    assert status == 200 and link.startswith("/accounts/invite/")
    user = get_user_model().objects.get(username="newbie")
    assert groups(user) == {"viewers"} and not user.has_usable_password()

    guest = Client()
    form = guest.get(link)
    assert form.status_code == 302  # the token moves into the session, out of the URL
    done = guest.post(
        form["Location"], {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD}
    )
    assert done.status_code == 302 and done["Location"] == "/accounts/login/"
    assert Client().login(username="newbie", password=NEW_PASSWORD)

    again = Client().get(link, follow=True)
    assert b'data-testid="invite-invalid"' in again.content
    assert AuditEntry.objects.filter(action="person_invite_accept", target="newbie").exists()
    entry = AuditEntry.objects.get(action="person_invite")
    assert entry.actor == boss and entry.after == {
        "role": "viewers",
        "admin": False,
        "sign_in": "password",
    }


def test_an_invite_link_expires(boss, settings):
    invite(page_client(boss), username="late")
    user = get_user_model().objects.get(username="late")

    class FourDaysAgo(InviteTokenGenerator):
        def _now(self) -> datetime:
            return datetime.now() - timedelta(days=4)

    from django.utils.encoding import force_bytes
    from django.utils.http import urlsafe_base64_encode

    uid = urlsafe_base64_encode(force_bytes(user.pk))
    old = f"/accounts/invite/{uid}/{FourDaysAgo().make_token(user)}/"
    fresh = f"/accounts/invite/{uid}/{InviteTokenGenerator().make_token(user)}/"
    assert settings.PASSWORD_RESET_TIMEOUT < 4 * 86400
    assert b'data-testid="invite-invalid"' in Client().get(old, follow=True).content
    assert b'data-testid="invite-form"' in Client().get(fresh, follow=True).content


def test_a_password_reset_token_is_no_invite_link(boss):
    from django.contrib.auth.tokens import default_token_generator
    from django.utils.encoding import force_bytes
    from django.utils.http import urlsafe_base64_encode

    invite(page_client(boss), username="other")
    user = get_user_model().objects.get(username="other")
    uid = urlsafe_base64_encode(force_bytes(user.pk))
    link = f"/accounts/invite/{uid}/{default_token_generator.make_token(user)}/"
    assert b'data-testid="invite-invalid"' in Client().get(link, follow=True).content


def test_deactivating_ends_the_invite_link(boss):
    _, link = invite(page_client(boss), username="gone")
    user = get_user_model().objects.get(username="gone")
    page_client(boss).post(f"/people/{user.pk}/deactivate/")
    assert b'data-testid="invite-invalid"' in Client().get(link, follow=True).content


def test_a_role_change_is_saved_and_audited(boss, viewer):
    response = page_client(boss).post(f"/people/{viewer.pk}/role/", {"role": "operators"})
    assert response.status_code == 302
    assert groups(viewer) == {"operators"}
    entry = AuditEntry.objects.get(action="person_role")
    assert (entry.actor_name, entry.target) == ("boss", "viewer")
    assert entry.before == {"role": "viewers", "admin": False}
    assert entry.after == {"role": "operators", "admin": False}


def test_deactivation_signs_out_and_revokes_tokens_at_once(boss, viewer):
    token = api_token_create(user=viewer)
    api = ApiClient()
    api.client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    session = page_client(viewer)
    assert api.get("/api/v1/tasks").status_code == 200
    assert session.get("/tasks/").status_code == 200

    assert page_client(boss).post(f"/people/{viewer.pk}/deactivate/").status_code == 302

    assert api.get("/api/v1/tasks").status_code == 401
    assert session.get("/tasks/")["Location"].startswith("/accounts/login/")
    assert not Client().login(username="viewer", password=PASSWORD)
    entry = AuditEntry.objects.get(action="person_deactivate")
    assert entry.after == {"active": False, "api_tokens_revoked": 1, "sessions_ended": 1}


def test_a_role_the_provider_maps_is_shown_as_such_and_cannot_be_changed(boss, sso_mapped):
    user = oidc_login_complete(config=sso_mapped, claims={"sub": "s1", "groups": ["idp-read"]})
    client = page_client(boss)
    page = client.get("/people/").content.decode()
    row = page[page.index(f'data-testid="person-{user.username}"') :].split("</tr>")[0]
    assert 'data-testid="person-role-provider"' in row and "from Test IdP" in row
    assert 'data-testid="role-select"' not in row

    refused = client.post(f"/people/{user.pk}/role/", {"role": "operators"})
    assert refused.status_code == 403
    assert b"role: this role comes from the identity provider" in refused.content
    assert groups(user) == {"viewers"}
    # The admin flag is the harness's own, not the provider's.
    kept = client.post(f"/people/{user.pk}/role/", {"role": "viewers", "admin": "on"})
    assert kept.status_code == 302 and get_user_model().objects.get(pk=user.pk).is_staff


def test_an_sso_identity_invited_ahead_is_the_one_the_first_sign_in_finds(boss, sso_mapped):
    client = page_client(boss)
    response = client.post(
        "/people/invite/",
        {"username": "carol", "role": "operators", "sign_in": "sso", "sso_subject": "c-1"},
    )
    assert response.status_code == 200 and response.context["invite_link"] == ""
    carol = get_user_model().objects.get(username="carol")
    assert groups(carol) == set()  # the provider's groups decide, at sign-in
    assert "not signed in yet" in client.get("/people/").content.decode()

    user = oidc_login_complete(config=sso_mapped, claims={"sub": "c-1", "groups": ["idp-ops"]})
    assert user.pk == carol.pk and groups(carol) == {"operators"}


def test_without_a_group_map_sign_ins_keep_the_roles_given_here(boss, settings, sso_mapped):
    settings.HARNESS_OIDC = unmapped = type(sso_mapped)(
        issuer=sso_mapped.issuer, client_id="harness", client_secret="s3cret"
    )
    user = oidc_login_complete(config=unmapped, claims={"sub": "d-1"})
    assert (
        page_client(boss).post(f"/people/{user.pk}/role/", {"role": "creators"}).status_code == 302
    )
    oidc_login_complete(config=unmapped, claims={"sub": "d-1"})
    assert groups(user) == {"creators"}


@pytest.mark.parametrize(
    ("fields", "status", "problem"),
    [
        ({"username": ""}, 422, b"username: This field is required."),
        ({"username": "bad name!"}, 422, b"username: Enter a valid username."),
        ({"username": "x", "role": "gods"}, 422, b"role: Select a valid choice."),
        ({"username": "x", "email": "nope"}, 422, b"email: Enter a valid email address."),
        ({"username": "boss"}, 409, b"username: an account with this username exists"),
        ({"username": "x", "sign_in": "sso"}, 422, b"sign_in: single sign-on is not configured"),
    ],
)
def test_bad_invitations_name_the_field(boss, fields, status, problem):
    response = page_client(boss).post(
        "/people/invite/", {"role": "viewers", "sign_in": "password", **fields}
    )
    assert response.status_code == status
    assert problem in response.content
    assert not get_user_model().objects.filter(username="x").exists()


def test_password_invitations_are_refused_while_local_login_is_off(boss, settings, sso_mapped):
    settings.HARNESS_LOCAL_LOGIN = False
    status, _ = invite(page_client(boss), username="pw")
    assert status == 422
    assert not get_user_model().objects.filter(username="pw").exists()


def test_only_people_managers_see_the_nav_link(boss, operator):
    assert b'data-testid="nav-people"' in page_client(boss).get("/").content
    assert b'data-testid="nav-people"' not in page_client(operator).get("/").content
    assert (
        b'data-testid="nav-people"'
        in page_client(UserFactory(username="su", is_superuser=True)).get("/").content
    )


@pytest.mark.parametrize("user_id", ["999999", "99999999999999999999"])
def test_an_unknown_person_is_a_404(boss, user_id):
    client = page_client(boss)
    assert client.post(f"/people/{user_id}/role/", {"role": "viewers"}).status_code == 404
    assert client.post(f"/people/{user_id}/deactivate/").status_code == 404
