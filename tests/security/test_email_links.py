"""Attacks on the decision links of notification emails (/reviews/{id}/email/{token}/): a
link is signed for one recipient, asks before it decides (GET decides nothing), decides only
through review_decide as the logged-in recipient, works once and dies with the review."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import urlsplit

import pytest
import time_machine
from django.core import mail, signing
from django.utils import timezone

from harness_base.config import EmailChannelConfig
from review.email_links import SALT, decision_link_urls
from review.models import DecisionReceipt, ReviewRequest
from review.notifications import review_message
from review.transports import Email
from tasks.canonical import canonical_hash
from tasks.models import Task
from tests.conftest import page_client
from tests.factories import ReviewRuleFactory

pytestmark = pytest.mark.django_db(transaction=True)

RULES = """
review_rules:
  - {name: destructive, risk: destructive, action: review, reason: "Deletes data.",
     expires_after: 3600}
"""


@pytest.fixture(autouse=True)
def _rules(harness_yaml) -> None:
    harness_yaml(RULES)


@pytest.fixture
def review(paused_review):
    return paused_review()


def with_email(user, address: str):
    user.email = address
    user.save(update_fields=["email"])
    return user


def links_for(review: ReviewRequest, user, *, arguments_hash: str | None = None) -> dict:
    """decision -> path of the links a mail to `user` carries."""
    urls = decision_link_urls(
        review_id=review.id,
        arguments_hash=arguments_hash or canonical_hash(review.arguments),
        email=user.email,
    )
    return {decision: urlsplit(url).path for decision, url in urls.items()}


def state_of(review: ReviewRequest) -> tuple[str, int, str]:
    review.refresh_from_db()
    return review.status, review.approvals.count(), Task.objects.get(pk=review.task_id).status


@pytest.fixture
def ops(operator):
    return with_email(operator, "ops@example.com")


def test_the_mail_carries_links_signed_for_its_recipient_only(review, ops, viewer):
    with_email(viewer, "viewer@example.com")
    message = review_message(
        review=ReviewRequest.objects.get(pk=review.pk),
        event="review.requested",
        now=timezone.now(),
    )
    channel = EmailChannelConfig(kind="email", to=["ops@example.com", "nobody@example.com"])
    Email(channel).notify(message=message, delivery_id="d1")
    by_address = {m.to[0]: m for m in mail.outbox}
    body = by_address["ops@example.com"].body
    assert f"/reviews/{review.id}/email/" in body and "Approve:" in body
    assert f"/reviews/{review.id}/" in body
    # An address with no harness account gets the page's link only.
    assert "/email/" not in by_address["nobody@example.com"].body
    approve_path = urlsplit(body.split("Approve: ")[1].split()[0]).path
    assert page_client(ops).get(approve_path).status_code == 200
    assert page_client(viewer).get(approve_path).status_code == 403


def test_opening_a_link_decides_nothing(review, ops):
    client = page_client(ops)
    response = client.get(links_for(review, ops)["approve"])
    assert response.status_code == 200
    assert b"link-confirm" in response.content
    assert state_of(review) == ("pending", 0, "waiting_review")
    assert page_client(None).get(links_for(review, ops)["approve"]).status_code == 302
    assert state_of(review) == ("pending", 0, "waiting_review")


def test_confirming_a_link_decides_through_the_gate(review, ops):
    response = page_client(ops).post(links_for(review, ops)["approve"])
    assert response.status_code == 302
    assert state_of(review) == ("approved", 1, "queued")
    assert DecisionReceipt.objects.filter(review_id=review.id, via="email").count() == 1


def test_a_reject_link_rejects(review, ops):
    page_client(ops).post(links_for(review, ops)["reject"])
    assert state_of(review)[0] == "rejected"


def test_a_tampered_or_forged_token_decides_nothing(review, ops):
    path = links_for(review, ops)["reject"]
    token = path.rstrip("/").rsplit("/", 1)[1]
    payload = signing.loads(token, salt=SALT)
    forged = [
        # The reject link turned into an approval, keeping the old signature.
        signing.dumps({**payload, "d": "approve"}, salt=SALT).split(":", 1)[0]
        + ":"
        + token.split(":", 1)[1],
        # Signed with another salt (another use of SECRET_KEY).
        signing.dumps({**payload, "d": "approve"}, salt="elsewhere"),
        "garbage",
    ]
    client = page_client(ops)
    for bad in forged:
        url = f"/reviews/{review.id}/email/{bad}/"
        assert client.get(url).status_code == 422
        response = client.post(url)
        assert response.status_code == 422
        assert b"not valid" in response.content
    assert state_of(review) == ("pending", 0, "waiting_review")


def test_a_token_for_another_review_decides_nothing(paused_review, ops):
    first = paused_review()
    second = paused_review()
    token = links_for(first, ops)["approve"].rstrip("/").rsplit("/", 1)[1]
    response = page_client(ops).post(f"/reviews/{second.id}/email/{token}/")
    assert response.status_code == 422
    assert b"another review" in response.content
    assert state_of(first)[0] == state_of(second)[0] == "pending"


def test_a_link_works_once(paused_review, ops, second_operator):
    ReviewRuleFactory(name="two-person-delete", tool="delete_file", approvals_required=2)
    review = paused_review()
    links = links_for(review, ops)
    client = page_client(ops)
    assert client.post(links["approve"]).status_code == 302
    assert state_of(review) == ("pending", 1, "waiting_review")
    again = client.post(links["approve"])
    assert again.status_code == 409 and b"already used" in again.content
    # The same mail's other link shares the nonce: it is spent too.
    other = client.post(links["reject"])
    assert other.status_code == 409 and b"already used" in other.content
    assert client.get(links["reject"]).status_code == 409
    assert state_of(review) == ("pending", 1, "waiting_review")


def test_a_link_after_expiry_decides_nothing(review, ops):
    path = links_for(review, ops)["approve"]
    with time_machine.travel(review.expires_at + timedelta(seconds=1)):
        client = page_client(ops)
        opened = client.get(path)
        assert opened.status_code == 409 and b"expired" in opened.content
        response = client.post(path)
        assert response.status_code == 409 and b"expired" in response.content
    assert state_of(review) == ("pending", 0, "waiting_review")


def test_a_forwarded_link_grants_nothing_to_another_operator(review, ops, second_operator):
    path = links_for(review, ops)["approve"]
    response = page_client(second_operator).post(path)
    assert response.status_code == 403 and b"sent to someone else" in response.content
    assert state_of(review) == ("pending", 0, "waiting_review")
    # Not spent: its recipient can still use it.
    assert page_client(ops).post(path).status_code == 302
    assert state_of(review)[0] == "approved"


def test_a_viewers_link_decides_nothing(review, viewer):
    with_email(viewer, "viewer@example.com")
    response = page_client(viewer).post(links_for(review, viewer)["approve"])
    assert response.status_code == 403 and b"only operators" in response.content
    assert state_of(review) == ("pending", 0, "waiting_review")


def test_the_creator_cannot_approve_by_link_under_forbid_creator(paused_review, ops):
    ReviewRuleFactory(name="delete-four-eyes", tool="delete_file", forbid_creator=True)
    review = paused_review(user=ops)
    assert review.forbid_creator
    response = page_client(ops).post(links_for(review, ops)["approve"])
    assert response.status_code == 403 and b"creator may not approve" in response.content
    assert state_of(review) == ("pending", 0, "waiting_review")


def test_a_link_with_a_stale_hash_decides_nothing(review, ops):
    path = links_for(review, ops, arguments_hash="0" * 64)["approve"]
    client = page_client(ops)
    assert client.get(path).status_code == 409
    response = client.post(path)
    assert response.status_code == 409 and b"changed since this mail was sent" in response.content
    assert state_of(review) == ("pending", 0, "waiting_review")
