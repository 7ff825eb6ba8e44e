"""Attacks on single sign-on, against a real OpenID provider (oidc-provider under node) and
headless Chromium. A stand-in in front of the provider's token endpoint hands the app an ID
token wrong in exactly one way (re-signed with the provider's own key, so only that one thing
is wrong): each must refuse the login, and the intact token through the same stand-in must
not. mozilla-django-oidc alone checks neither the audience nor the issuer."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from accounts.models import SsoIdentity
from tests.conftest import BROWSER
from tests.factories import PASSWORD, UserFactory

pytestmark = BROWSER


def signed_in(page, live_server) -> bool:
    page.goto(f"{live_server.url}/tasks/")
    return "/accounts/login/" not in page.url


@pytest.mark.parametrize(
    ("how", "reason"),
    [
        ("forged", "signature does not verify"),
        ("expired", "has expired"),
        ("wrong_audience", "issued to another client"),
        ("wrong_issuer", "comes from another issuer"),
        ("wrong_nonce", "nonce is not this sign-in's"),
        ("unsigned", "signed with 'none'"),
    ],
)
def test_an_id_token_wrong_in_one_way_signs_nobody_in(
    how, reason, sso, idp, token_standin, sso_login, live_server
):
    idp.account("mallory", groups=["idp-ops"])
    token_standin(how)

    visit = sso_login("mallory")

    assert reason in visit.page.text_content("[data-testid=sso-error]")
    assert not signed_in(visit.page, live_server)
    assert not SsoIdentity.objects.filter(subject="mallory").exists()


def test_the_intact_token_through_the_same_stand_in_signs_in(
    sso, idp, token_standin, sso_login, live_server
):
    idp.account("alice", groups=["idp-ops"])
    token_standin("intact")

    visit = sso_login("alice")

    assert signed_in(visit.page, live_server)


def test_a_replayed_callback_is_refused(sso, idp, sso_login, browser, live_server):
    idp.account("alice", groups=["idp-ops"])
    visit = sso_login("alice")
    [callback] = visit.callbacks

    # Again in the same browser: the state was used up by the first sign-in.
    again = visit.page.goto(callback)
    assert again.status == 400
    assert "state" in visit.page.text_content("[data-testid=sso-error]")
    # In another browser (a leaked URL): that session never started this sign-in.
    other = browser.new_context().new_page()
    stolen = other.goto(callback)
    assert stolen.status == 403
    assert not signed_in(other, live_server)


def test_an_idp_account_with_a_local_users_email_does_not_get_that_account(
    sso, idp, sso_login, live_server
):
    victim = UserFactory(username="victim", roles=["operators"])
    victim.email = "victim@example.test"
    victim.save(update_fields=["email"])
    idp.account("mallory", groups=[], email="victim@example.test")

    visit = sso_login("mallory")

    user = SsoIdentity.objects.get(issuer=idp.issuer, subject="mallory").user
    assert user.pk != victim.pk
    assert not user.groups.exists()
    assert visit.page.text_content("[data-testid=nav-user]").startswith("mallory")


def test_with_local_login_off_passwords_are_refused_except_a_break_glass_superuser(
    local_login_off, idp, sso_login, browser, live_server
):
    operator = UserFactory(username="operator", roles=["operators"], is_staff=True)
    root = get_user_model().objects.create_superuser("root", "", PASSWORD)

    # The form is not just hidden: the server refuses the password, on either form.
    for path in ("/accounts/login/", "/admin/login/"):
        client = Client()
        client.post(path, {"username": operator.username, "password": PASSWORD})
        assert "_auth_user_id" not in client.session, path
    page = browser.new_page()
    page.goto(f"{live_server.url}/accounts/login/")
    assert page.is_visible("text=Sign in with Test IdP")
    assert not page.is_visible("input[name=password]")
    page.click("text=Break-glass administrator login")
    page.fill("input[name=username]", operator.username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_selector("[data-testid=local-login-refused]")
    assert not signed_in(page, live_server)

    # Break-glass: a superuser created from the command line still signs in with a password.
    client = Client()
    client.post("/accounts/login/", {"username": root.username, "password": PASSWORD})
    assert client.session["_auth_user_id"] == str(root.pk)
    # And single sign-on works as before.
    idp.account("alice", groups=["idp-ops"])
    assert signed_in(sso_login("alice").page, live_server)


def test_a_password_form_posted_with_a_code_and_state_starts_no_code_exchange(sso, idp):
    # Django offers every backend every credential set; only the callback may start an
    # exchange (here the provider would refuse the made-up code: a 502, or worse, a 500).
    UserFactory(username="operator", roles=["operators"])

    response = Client().post(
        "/accounts/login/?code=made-up&state=made-up",
        {"username": "operator", "password": "wrong"},
    )

    assert response.status_code == 200
    assert b"Please try again" in response.content
