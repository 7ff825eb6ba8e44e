"""Policy rules edited in the Django admin take effect; paused calls are read-only there."""

from __future__ import annotations

import pytest

from review.models import ReviewRule
from review.policy import evaluate
from tasks.tools.registry import registry
from tests.conftest import page_client

pytestmark = pytest.mark.django_db(transaction=True)


def rule_form(**fields) -> dict:
    return {
        "name": "no-secrets",
        "position": 10,
        "enabled": "on",
        "action": "deny",
        "tool": "read_file",
        "risk": "",
        "path_glob": "",
        "command_regex": "",
        "url_host": "",
        "reason": "",
        "expires_after": "",
        "on_expiry": "reject",
        "approvals_required": 1,
        **fields,
    }


def test_an_admin_adds_a_rule_that_the_policy_applies(admin_user):
    client = page_client(admin_user)
    bad = client.post("/admin/review/reviewrule/add/", rule_form(command_regex="(["))
    assert bad.status_code == 200 and "invalid regular expression" in bad.content.decode()
    assert not ReviewRule.objects.exists()

    added = client.post(
        "/admin/review/reviewrule/add/",
        rule_form(path_glob="secrets/*", reason="Secrets stay secret."),
    )
    assert added.status_code == 302
    decision = evaluate(tool=registry.get("read_file"), args={"path": "secrets/key.pem"})
    assert decision.action == "deny" and decision.reason == "Secrets stay secret."


def test_paused_calls_cannot_be_edited_in_the_admin(paused_review, admin_user):
    review = paused_review()
    client = page_client(admin_user)
    page = client.get(f"/admin/review/reviewrequest/{review.id}/change/")
    assert page.status_code == 200
    client.post(f"/admin/review/reviewrequest/{review.id}/change/", {"status": "approved"})
    review.refresh_from_db()
    assert review.status == "pending"
    assert client.get("/admin/review/reviewrequest/add/").status_code == 403
