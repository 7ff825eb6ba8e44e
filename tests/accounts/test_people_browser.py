"""In headless Chromium: an admin invites a viewer, who sets a password through the one-time
link; the admin makes them an operator, then deactivates them, and their API token is refused
at the very next request (real HTTP against the live server) and their session is gone."""

from __future__ import annotations

import requests
from django.contrib.auth import get_user_model
from django.db import connections

from tasks.services import api_token_create
from tests.conftest import BROWSER
from tests.factories import UserFactory

pytestmark = BROWSER

NEW_PASSWORD = "a long new password 42"
CANCEL_UNKNOWN = "/api/v1/tasks/00000000-0000-0000-0000-000000000000/cancel"


def test_an_admin_invites_a_viewer_makes_them_operator_and_deactivates_them(
    live_server, browser, open_page, roles
):
    boss = UserFactory(username="boss", roles=["operators"], is_staff=True)
    page = open_page(boss, "/")
    page.click("[data-testid=nav-people]")
    page.fill("[data-testid=invite-username]", "newbie")
    page.select_option("[data-testid=invite-role]", "viewers")
    page.click("[data-testid=invite-submit]")
    link = page.input_value("[data-testid=invite-link]")
    row = "[data-testid=person-newbie]"
    assert page.inner_text(f"{row} [data-testid=person-role]") == "viewer"

    # The invited person, in their own browser, sets a password with the link and signs in.
    guest = browser.new_context().new_page()
    guest.goto(link)
    guest.fill("input[name=new_password1]", NEW_PASSWORD)
    guest.fill("input[name=new_password2]", NEW_PASSWORD)
    guest.click("[data-testid=invite-form] button[type=submit]")
    guest.wait_for_url(f"{live_server.url}/accounts/login/")
    guest.fill("input[name=username]", "newbie")
    guest.fill("input[name=password]", NEW_PASSWORD)
    guest.click("button[type=submit]")
    guest.wait_for_url(f"{live_server.url}/")
    guest.goto(f"{live_server.url}/tasks/")
    assert guest.is_visible("[data-testid=nav-people]") is False

    token = api_token_create(user=get_user_model().objects.get(username="newbie"))
    # The ORM's connection in Playwright's context: closed here, where it was opened.
    connections.close_all()
    bearer = {"Authorization": f"Bearer {token}"}
    # A viewer may read, not operate.
    assert requests.post(live_server.url + CANCEL_UNKNOWN, headers=bearer).status_code == 403

    page.select_option(f"{row} [data-testid=role-select]", "operators")
    page.click(f"{row} [data-testid=role-save]")
    page.wait_for_selector(f"{row} [data-testid=person-role]:text-is('operator')")
    # An operator may: the unknown task is a 404, not a 403.
    assert requests.post(live_server.url + CANCEL_UNKNOWN, headers=bearer).status_code == 404

    page.once("dialog", lambda dialog: dialog.accept())
    page.click(f"{row} [data-testid=deactivate]")
    page.wait_for_selector(f"{row} [data-testid=person-inactive]")

    refused = requests.get(f"{live_server.url}/api/v1/tasks", headers=bearer)
    assert refused.status_code == 401
    assert requests.post(live_server.url + CANCEL_UNKNOWN, headers=bearer).status_code == 401
    guest.goto(f"{live_server.url}/tasks/")
    assert "/accounts/login/" in guest.url
    page.goto(f"{live_server.url}/audit/?actor=boss")
    audit = page.inner_text("[data-testid=audit-table]")
    for action in ("person_invite", "person_role", "person_deactivate"):
        assert action in audit
