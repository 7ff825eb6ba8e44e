"""People are matched to their notification identities by verified email only, and a Slack
user id a person set on their profile wins over email. Single sign-on stored whatever email
the provider sent: an account whose provider let anyone type in someone else's address got
that address, and with it that person's Slack clicks and email decision links."""

from __future__ import annotations

import pytest

from accounts.config import OidcConfig
from accounts.flows.oidc_login import oidc_login_complete
from review.email_links import decision_link_urls
from review.models import ReviewerProfile, ReviewRequest
from review.services import ReviewForbidden, ReviewInvalid, reviewer_slack_id_set
from tasks.canonical import canonical_hash
from tests.conftest import page_client
from tests.security.test_slack_actions import (  # noqa: F401  (shared fixtures)
    click,
    post,
    review,
    signed,
    slack,
    state_of,
)

pytestmark = pytest.mark.django_db(transaction=True)

CONFIG = OidcConfig(
    issuer="https://idp.example.test",
    client_id="harness",
    client_secret="secret",
    group_map={"idp-ops": "operators"},
)
VICTIM = "dba@example.com"


def sign_in(subject: str, **claims):
    return oidc_login_complete(
        config=CONFIG, claims={"sub": subject, "groups": ["idp-ops"], **claims}
    )


@pytest.mark.parametrize("verified", [False, None, "false", "yes", 1])
def test_single_sign_on_stores_no_email_the_provider_does_not_verify(roles, verified):
    claims = (
        {"email": VICTIM} if verified is None else {"email": VICTIM, "email_verified": verified}
    )
    user = sign_in("mallory", **claims)
    assert user.email == ""
    assert decision_link_urls(review_id=1, arguments_hash="0" * 64, email=VICTIM) == {}


def test_single_sign_on_links_a_verified_email_and_drops_one_no_longer_verified(roles):
    user = sign_in("dba", email=VICTIM, email_verified=True)
    assert user.email == VICTIM
    assert set(decision_link_urls(review_id=1, arguments_hash="0" * 64, email=VICTIM)) == {
        "approve",
        "reject",
    }
    # An address the account already holds, asserted now without verification: cleared.
    user = sign_in("dba", email=VICTIM, email_verified=False)
    assert user.email == ""
    user = sign_in("dba", email="new@example.com", email_verified="true")
    assert user.email == "new@example.com"


def test_a_slack_click_is_not_matched_to_an_unverified_sso_email(
    slack,  # noqa: F811  (the imported fixture)
    review,  # noqa: F811
):
    sign_in("mallory", email=VICTIM, email_verified=False)
    slack.users["U_DBA"] = VICTIM
    body = click(slack, review, slack_user="U_DBA")
    assert post(body, signed(body)).status_code == 200
    assert state_of(review) == ("pending", 0, "waiting_review")
    assert "no harness account has your Slack email" in slack.last_text()


def test_the_slack_user_id_on_a_profile_wins_over_the_email(
    slack,  # noqa: F811
    review,  # noqa: F811
    operator,
    second_operator,
    admin_user,
):
    """Slack says U_SHARED's email is the operator's; an administrator mapped U_SHARED to the
    second operator: the click decides as the second operator, and Slack is not asked."""
    operator.email = "ops@example.com"
    operator.save(update_fields=["email"])
    slack.users["U_SHARED"] = "ops@example.com"
    reviewer_slack_id_set(user=second_operator, slack_user_id="U_SHARED", by=admin_user)
    body = click(slack, review, slack_user="U_SHARED")
    assert post(body, signed(body)).status_code == 200
    decided = ReviewRequest.objects.get(pk=review.pk)
    assert decided.status == "approved" and decided.decided_by == second_operator
    assert slack.tokens == []  # users.info was not needed


def test_nobody_claims_a_slack_user_id_for_themselves(
    slack,  # noqa: F811
    review,  # noqa: F811
    operator,
    second_operator,
):
    """The second operator tries to take the operator's Slack id on their own preferences: it
    is refused (naming the field, nothing stored), and the operator's click still decides as
    the operator. Before, the claim was stored and the operator's clicks decided as the
    claimant."""
    operator.email = "ops@example.com"
    operator.save(update_fields=["email"])
    slack.users["U0OPS"] = "ops@example.com"
    claimed = page_client(second_operator).post("/preferences/", {"slack_user_id": "U0OPS"})
    assert claimed.status_code == 422
    assert "slack_user_id:" in claimed.content.decode()
    assert not ReviewerProfile.objects.filter(slack_user_id="U0OPS").exists()
    with pytest.raises(ReviewForbidden):
        reviewer_slack_id_set(user=second_operator, slack_user_id="U0OPS", by=second_operator)
    body = click(slack, review, slack_user="U0OPS")
    assert post(body, signed(body)).status_code == 200
    assert ReviewRequest.objects.get(pk=review.pk).decided_by == operator


def test_a_slack_user_id_belongs_to_one_person_and_must_look_like_one(
    operator, second_operator, admin_user
):
    reviewer_slack_id_set(user=operator, slack_user_id="U0OPS", by=admin_user)
    for value, message in (
        ("U0OPS", "another account has this Slack user id"),
        ("<@U0OPS>", "not a Slack user id"),
    ):
        with pytest.raises(ReviewInvalid, match=message) as refused:
            reviewer_slack_id_set(user=second_operator, slack_user_id=value, by=admin_user)
        assert refused.value.errors[0]["field"] == "slack_user_id"
    page = page_client(operator).get("/preferences/").content.decode()
    assert "<code>U0OPS</code>" in page


def test_the_email_link_goes_only_to_a_verified_address(operator):
    operator.email = "ops@example.com"
    operator.save(update_fields=["email"])
    hashed = canonical_hash({"path": "old.log"})
    assert decision_link_urls(review_id=1, arguments_hash=hashed, email="OPS@example.com")
    assert decision_link_urls(review_id=1, arguments_hash=hashed, email="ops@example.com\x00") == {}
