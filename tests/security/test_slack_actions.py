"""Attacks on deciding from Slack (POST /integrations/slack/actions/): requests are signed
exactly as Slack signs them (`v0=` HMAC-SHA256 of `v0:{ts}:{body}`); a loopback HTTP server
stands in for Slack's Web API (users.info) and records what is posted to `response_url`. A
click decides only through review_decide, as the harness user with the clicker's email."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlencode

import pytest
import time_machine
from django.test import Client

from review.models import DecisionReceipt, ReviewRequest
from review.slack_answers import response_url_allowed
from tasks.canonical import canonical_hash
from tasks.models import Task
from tests.conftest import http_serving
from tests.factories import ReviewRuleFactory

pytestmark = pytest.mark.django_db(transaction=True)

URL = "/integrations/slack/actions/"
SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
CONFIG = """
review_rules:
  - {name: destructive, risk: destructive, action: review, reason: "Deletes data.",
     expires_after: 3600}
notifications:
  channels:
    ops-slack: {kind: slack, webhook_url_env: T_SLACK_HOOK, signing_secret_env: T_SLACK_SIGNING,
                bot_token_env: T_SLACK_BOT}
"""


class SlackStandIn:
    """users.info answers from `users` (Slack id -> email); POSTs to /respond are recorded."""

    def __init__(self) -> None:
        self.users: dict[str, str] = {}
        self.responses: list[dict[str, Any]] = []
        self.tokens: list[str] = []
        self.url = ""

    @property
    def response_url(self) -> str:
        return f"{self.url}/respond/T1"

    def last_text(self) -> str:
        return self.responses[-1]["text"]


@pytest.fixture
def slack(monkeypatch, settings, harness_yaml) -> Iterator[SlackStandIn]:
    state = SlackStandIn()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"])).decode()
            if self.path.startswith("/respond/"):
                state.responses.append(json.loads(body))
                answer: dict[str, Any] = {}
            else:
                assert self.path == "/api/users.info", self.path
                state.tokens.append(self.headers.get("Authorization", ""))
                user_id = parse_qs(body)["user"][0]
                email = state.users.get(user_id)
                answer = (
                    {"ok": True, "user": {"id": user_id, "profile": {"email": email}}}
                    if email
                    else {"ok": False, "error": "user_not_found"}
                )
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args) -> None:
            pass

    with http_serving(Handler) as server:
        state.url = f"http://127.0.0.1:{server.server_port}"
        settings.HARNESS_SLACK_API_URL = f"{state.url}/api/"
        monkeypatch.setenv("T_SLACK_HOOK", f"{state.url}/hook")
        monkeypatch.setenv("T_SLACK_SIGNING", SIGNING_SECRET)
        monkeypatch.setenv("T_SLACK_BOT", "xoxb-test-token")
        harness_yaml(CONFIG)
        yield state


def click(
    slack: SlackStandIn,
    review: ReviewRequest,
    *,
    slack_user: str,
    action: str = "review_approve",
    arguments_hash: str | None = None,
    response_url: str | None = None,
) -> bytes:
    """The form body Slack posts when `slack_user` clicks a button of the review's message."""
    value = {
        "review_id": review.id,
        "arguments_hash": arguments_hash or canonical_hash(review.arguments),
    }
    payload = {
        "type": "block_actions",
        "user": {"id": slack_user, "username": "someone", "team_id": "T1"},
        "team": {"id": "T1"},
        "response_url": response_url or slack.response_url,
        "actions": [
            {"action_id": action, "block_id": f"review-{review.id}", "value": json.dumps(value)}
        ],
    }
    return urlencode({"payload": json.dumps(payload)}).encode()


def signed(body: bytes, *, secret: str = SIGNING_SECRET, at: int | None = None) -> dict:
    timestamp = str(int(time.time()) if at is None else at)
    digest = hmac.new(
        secret.encode(), f"v0:{timestamp}:".encode() + body, hashlib.sha256
    ).hexdigest()
    return {
        "HTTP_X_SLACK_REQUEST_TIMESTAMP": timestamp,
        "HTTP_X_SLACK_SIGNATURE": f"v0={digest}",
    }


def post(body: bytes, headers: dict):
    return Client().post(
        URL, data=body, content_type="application/x-www-form-urlencoded", **headers
    )


def state_of(review: ReviewRequest) -> tuple[str, int, str]:
    review.refresh_from_db()
    return review.status, review.approvals.count(), Task.objects.get(pk=review.task_id).status


@pytest.fixture
def review(paused_review):
    return paused_review()


@pytest.fixture
def slack_operator(slack, operator):
    operator.email = "ops@example.com"
    operator.save(update_fields=["email"])
    slack.users["U_OPS"] = "OPS@example.com"
    return operator


def test_a_signed_click_by_an_operator_approves_through_the_gate(slack, slack_operator, review):
    body = click(slack, review, slack_user="U_OPS")
    response = post(body, signed(body))
    assert response.status_code == 200
    assert state_of(review) == ("approved", 1, "queued")
    assert "approved by operator" in slack.last_text()
    assert slack.tokens == ["Bearer xoxb-test-token"]
    assert DecisionReceipt.objects.filter(review_id=review.id, via="slack").count() == 1


def test_a_response_url_off_slacks_host_is_never_called(slack, slack_operator, paused_review):
    """The harness posts its answer only to Slack's own host: a signed request naming another
    host (another port, user info, plain HTTP to Slack's hook host) still decides, and its
    answer is the response body, but nothing is sent to that URL."""
    elsewhere: list[str] = []

    class Recorder(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            elsewhere.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    with http_serving(Recorder) as server:
        other = f"127.0.0.1:{server.server_port}"
        for response_url in (
            f"http://{other}/respond/T1",
            f"http://hooks.slack.com@{other}/respond/T1",
            f"http://{slack.url.removeprefix('http://')}@{other}/respond/T1",
        ):
            review = paused_review()
            body = click(slack, review, slack_user="U_OPS", response_url=response_url)
            response = post(body, signed(body))
            assert response.status_code == 200
            assert "approved by operator" in response.json()["text"]
            assert state_of(review)[0] == "approved"
    assert elsewhere == [] and slack.responses == []


def test_a_reject_click_rejects(slack, slack_operator, review):
    body = click(slack, review, slack_user="U_OPS", action="review_reject")
    assert post(body, signed(body)).status_code == 200
    assert state_of(review)[0] == "rejected"


def test_a_forged_signature_decides_nothing(slack, slack_operator, review):
    body = click(slack, review, slack_user="U_OPS")
    response = post(body, signed(body, secret="not-the-signing-secret"))
    assert response.status_code == 401
    assert state_of(review) == ("pending", 0, "waiting_review")
    assert slack.responses == [] and slack.tokens == []


def test_a_missing_signature_decides_nothing(slack, slack_operator, review):
    body = click(slack, review, slack_user="U_OPS")
    stamp_only = {"HTTP_X_SLACK_REQUEST_TIMESTAMP": str(int(time.time()))}
    bad_stamp = {**signed(body), "HTTP_X_SLACK_REQUEST_TIMESTAMP": "soon"}
    for headers in ({}, stamp_only, bad_stamp):
        assert post(body, headers).status_code == 401
    assert state_of(review) == ("pending", 0, "waiting_review")


def test_a_body_altered_after_signing_decides_nothing(slack, slack_operator, review):
    body = click(slack, review, slack_user="U_OPS", action="review_reject")
    headers = signed(body)
    approve = click(slack, review, slack_user="U_OPS")
    assert post(approve, headers).status_code == 401
    assert state_of(review) == ("pending", 0, "waiting_review")


def test_a_request_replayed_after_five_minutes_decides_nothing(slack, slack_operator, review):
    body = click(slack, review, slack_user="U_OPS")
    headers = signed(body, at=int(time.time()) - 301)
    assert post(body, headers).status_code == 401
    assert state_of(review) == ("pending", 0, "waiting_review")


def test_a_captured_request_resent_later_decides_nothing(slack, slack_operator, paused_review):
    ReviewRuleFactory(name="two-person-delete", tool="delete_file", approvals_required=2)
    review = paused_review()
    body = click(slack, review, slack_user="U_OPS")
    headers = signed(body)
    with time_machine.travel(time.time() + 400):
        assert post(body, headers).status_code == 401
    assert state_of(review) == ("pending", 0, "waiting_review")


def test_an_unknown_slack_user_decides_nothing_and_is_told_why(slack, slack_operator, review):
    body = click(slack, review, slack_user="U_STRANGER")
    response = post(body, signed(body))
    assert response.status_code == 200
    assert state_of(review) == ("pending", 0, "waiting_review")
    assert "Nothing was decided" in slack.last_text()
    assert "did not say who you are" in slack.last_text()


def test_a_slack_email_with_no_harness_account_decides_nothing(slack, slack_operator, review):
    slack.users["U_NEW"] = "newcomer@example.com"
    body = click(slack, review, slack_user="U_NEW")
    post(body, signed(body))
    assert state_of(review) == ("pending", 0, "waiting_review")
    assert "no harness account has your Slack email" in slack.last_text()


def test_a_viewer_in_slack_decides_nothing(slack, viewer, review):
    viewer.email = "viewer@example.com"
    viewer.save(update_fields=["email"])
    slack.users["U_VIEW"] = "viewer@example.com"
    body = click(slack, review, slack_user="U_VIEW")
    assert post(body, signed(body)).status_code == 200
    assert state_of(review) == ("pending", 0, "waiting_review")
    assert "only operators may decide" in slack.last_text()


def test_the_creator_cannot_approve_from_slack_under_forbid_creator(
    slack, slack_operator, paused_review
):
    ReviewRuleFactory(name="delete-four-eyes", tool="delete_file", forbid_creator=True)
    review = paused_review(user=slack_operator)
    assert review.forbid_creator
    body = click(slack, review, slack_user="U_OPS")
    post(body, signed(body))
    assert state_of(review) == ("pending", 0, "waiting_review")
    assert "creator may not approve" in slack.last_text()


def test_a_second_approval_by_the_same_user_is_not_counted(
    slack, slack_operator, second_operator, paused_review
):
    ReviewRuleFactory(name="two-person-delete", tool="delete_file", approvals_required=2)
    review = paused_review()
    assert review.approvals_required == 2
    first = click(slack, review, slack_user="U_OPS")
    post(first, signed(first))
    assert state_of(review) == ("pending", 1, "waiting_review")
    assert "1 of 2" in slack.last_text()
    # The same click again (a duplicate, or the captured request replayed in the window).
    post(first, signed(first))
    assert state_of(review) == ("pending", 1, "waiting_review")
    assert "you already approved" in slack.last_text()

    second_operator.email = "ops2@example.com"
    second_operator.save(update_fields=["email"])
    slack.users["U_OPS2"] = "ops2@example.com"
    other = click(slack, review, slack_user="U_OPS2")
    post(other, signed(other))
    assert state_of(review) == ("approved", 2, "queued")


def test_a_stale_hash_decides_nothing(slack, slack_operator, review):
    body = click(slack, review, slack_user="U_OPS", arguments_hash="0" * 64)
    assert post(body, signed(body)).status_code == 200
    assert state_of(review) == ("pending", 0, "waiting_review")
    assert "changed since this message was sent" in slack.last_text()


def test_a_click_after_expiry_decides_nothing(slack, slack_operator, review):
    assert review.expires_at is not None
    with time_machine.travel(review.expires_at + timedelta(seconds=1)):
        body = click(slack, review, slack_user="U_OPS")
        assert post(body, signed(body)).status_code == 200
    assert state_of(review) == ("pending", 0, "waiting_review")
    assert "expired" in slack.last_text()


def test_a_duplicate_click_after_the_decision_is_already_decided(slack, slack_operator, review):
    body = click(slack, review, slack_user="U_OPS")
    post(body, signed(body))
    again = click(slack, review, slack_user="U_OPS", action="review_reject")
    post(again, signed(again))
    assert state_of(review) == ("approved", 1, "queued")
    assert "already approved" in slack.last_text()
    assert DecisionReceipt.objects.filter(review_id=review.id).count() == 1


@pytest.mark.parametrize(
    "form",
    [
        b"payload=not-json",
        b"nopayload=1",
        b"payload=" + json.dumps({"type": "view_submission"}).encode(),
        urlencode(
            {"payload": json.dumps({"type": "block_actions", "actions": [{"action_id": "x"}]})}
        ).encode(),
        urlencode(
            {
                "payload": json.dumps(
                    {
                        "type": "block_actions",
                        "user": {"id": "U_OPS"},
                        "actions": [{"action_id": "review_approve", "value": '{"review_id":"1"}'}],
                    }
                )
            }
        ).encode(),
    ],
)
def test_a_signed_but_malformed_payload_is_a_4xx_naming_the_field(slack, form):
    response = post(form, signed(form))
    assert response.status_code == 400
    assert "payload" in response.json()["text"]


def test_a_multipart_post_is_refused_without_a_server_error(slack, slack_operator, review):
    response = Client().post(URL, {"payload": "{}"})
    assert response.status_code == 401
    assert state_of(review) == ("pending", 0, "waiting_review")


@pytest.mark.parametrize(
    "url",
    [
        "http://hooks.slack.com/actions/T1/1/x",
        "https://hooks.slack.com.example.org/actions/T1/1/x",
        "https://hooks.slack.com@example.org/actions/T1/1/x",
        "https://example.org/actions/T1/1/x",
        "https://a@hooks.slack.com/actions/T1/1/x",
        "ftp://hooks.slack.com/x",
        "/actions/T1/1/x",
        "",
    ],
)
def test_only_slacks_own_hook_host_may_be_a_response_url(url):
    assert response_url_allowed("https://hooks.slack.com/actions/T1/1/x")
    assert not response_url_allowed(url)
