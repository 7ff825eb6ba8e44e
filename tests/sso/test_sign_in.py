"""Single sign-on end to end: Chromium signs in at a real OpenID provider (oidc-provider under
node), the app verifies the ID token and maps the provider's groups to roles, again at every
login."""

from __future__ import annotations

import dataclasses

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from accounts.models import SsoIdentity
from accounts.oidc import oidc_discovery
from review.models import ReviewRequest
from review.selectors import user_can_decide
from tasks.models import AuditEntry
from tests.conftest import BROWSER, approve, wait_for
from tests.sso.fixtures import BASIC_CLIENT_ID, BASIC_CLIENT_SECRET

pytestmark = BROWSER


def roles_of(user) -> set[str]:
    return set(Group.objects.filter(user=user).values_list("name", flat=True))


def sso_user(issuer: str, subject: str):
    return SsoIdentity.objects.select_related("user").get(issuer=issuer, subject=subject).user


def test_signing_in_creates_the_user_with_the_roles_its_groups_map_to(
    sso, idp, sso_login, live_server
):
    idp.account("alice", groups=["idp-ops", "idp-unmapped"])

    visit = sso_login("alice")

    assert visit.page.url == f"{live_server.url}/"
    assert visit.page.text_content("[data-testid=nav-user]").startswith("alice")
    user = sso_user(idp.issuer, "alice")
    assert roles_of(user) == {"operators"}
    assert not user.has_usable_password()
    assert user.email == "alice@idp.test"
    entry = AuditEntry.objects.get(action="sso_login", actor=user)
    assert entry.before == {"roles": []}
    assert entry.after == {"roles": ["operators"], "groups": ["idp-ops", "idp-unmapped"]}
    # The same person again is the same user, not a second account.
    sso_login("alice")
    assert get_user_model().objects.filter(sso_identity__subject="alice").count() == 1


def test_the_login_page_offers_the_provider_and_still_the_password_form(sso, browser, live_server):
    page = browser.new_page()
    page.goto(f"{live_server.url}/tasks/")

    assert page.is_visible("text=Sign in with Test IdP")
    assert page.is_visible("input[name=password]")


@pytest.mark.integration
def test_a_group_removed_in_the_provider_removes_the_role_at_the_next_login_and_the_approval(
    sso, idp, sso_login, live_server, operator, paused_review, worker_pool
):
    idp.account("alice", groups=["idp-ops"])
    sso_login("alice")
    alice = sso_user(idp.issuer, "alice")
    # A group that is not one of the roles is the admins' business: the mapping leaves it.
    auditors = Group.objects.create(name="auditors")
    alice.groups.add(auditors)
    review = paused_review(user=operator)
    approve(review, alice)

    idp.account("alice", groups=["idp-read"])
    visit = sso_login("alice")

    alice = sso_user(idp.issuer, "alice")
    assert roles_of(alice) == {"viewers", "auditors"}
    assert not user_can_decide(alice)
    assert AuditEntry.objects.filter(action="sso_login", actor=alice).latest("at").after[
        "roles"
    ] == ["viewers"]
    # The approval alice gave as an operator does not run the call: the worker re-checks the
    # approver's roles (as the last login stored them) and asks again.
    worker_pool.start(1)
    reopened = wait_for(
        lambda: ReviewRequest.objects.filter(reopened_from=review, status="pending").first(),
        90,
        message="the worker to reopen the review",
    )
    assert any("approver alice no longer may approve" in c for c in reopened.changes)
    assert (review.task.workspace_path / "old.log").exists()
    visit.page.goto(f"{live_server.url}/reviews/{reopened.id}/")
    assert visit.page.locator("[data-testid=approve]").count() == 0


def test_a_client_that_authenticates_with_http_basic_signs_in(
    sso, settings, idp, sso_login, live_server
):
    settings.HARNESS_OIDC = dataclasses.replace(
        sso,
        client_id=BASIC_CLIENT_ID,
        client_secret=BASIC_CLIENT_SECRET,
        token_auth="client_secret_basic",
    )
    oidc_discovery(settings.HARNESS_OIDC, refresh=True)
    idp.account("alice", groups=["idp-dev"])

    visit = sso_login("alice")

    assert visit.page.url == f"{live_server.url}/"
    assert roles_of(sso_user(idp.issuer, "alice")) == {"creators"}
