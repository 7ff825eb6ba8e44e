"""Attacks on notification channels: a receiver that redirects the signed message elsewhere, a
secret that must never show up in a row, a page or a log, and a channel that is down while
the review's deadline passes (it expires as it would have; the channel decides nothing)."""

from __future__ import annotations

import logging
from http.server import BaseHTTPRequestHandler

import pytest

from review.models import Notification, ReviewRequest
from review.notifications import notification_send
from review.services import reviews_expire_overdue
from tests.conftest import http_serving

pytestmark = pytest.mark.django_db(transaction=True)

RULES = """
review_rules:
  - {name: destructive, risk: destructive, action: review, expires_after: 1h}
notifications:
  channels:
    ops-hook: {kind: webhook, url: "RECEIVER", secret_env: OPS_HOOK_SECRET}
  routes:
    - match: {}
      notify: [ops-hook]
"""
SECRET = "whsec_c2VjcmV0LXZhbHVlLW5ldmVyLXNob3du"


def handler(hits: list[str], *, status: int = 204, location: str = ""):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            hits.append(self.path)
            self.send_response(status)
            if location:
                self.send_header("Location", location)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    return Handler


def the_row(review: ReviewRequest) -> Notification:
    return Notification.objects.get(review=review, event="review.requested")


def test_a_receiver_cannot_redirect_the_signed_message_elsewhere(
    harness_yaml, paused_review, monkeypatch
):
    monkeypatch.setenv("OPS_HOOK_SECRET", SECRET)
    elsewhere: list[str] = []
    hook: list[str] = []
    with http_serving(handler(elsewhere)) as other:
        target = f"http://127.0.0.1:{other.server_port}/collect"
        with http_serving(handler(hook, status=307, location=target)) as server:
            harness_yaml(RULES.replace("RECEIVER", f"http://127.0.0.1:{server.server_port}/h"))
            review = paused_review()
            assert notification_send(notification_id=the_row(review).id) == "pending"
    assert hook == ["/h"] and elsewhere == []
    assert the_row(review).last_error == "HTTP 307: redirects are not followed"


def test_a_bad_or_missing_secret_is_named_never_shown(
    harness_yaml, paused_review, monkeypatch, operator, as_user, caplog
):
    caplog.set_level(logging.DEBUG)
    hits: list[str] = []
    malformed = "whsec_!!definitely-the-secret!!"
    monkeypatch.setenv("OPS_HOOK_SECRET", malformed)
    with http_serving(handler(hits)) as server:
        harness_yaml(RULES.replace("RECEIVER", f"http://127.0.0.1:{server.server_port}/h"))
        review = paused_review()
        notification_send(notification_id=the_row(review).id)
    assert hits == []
    error = the_row(review).last_error
    assert "OPS_HOOK_SECRET" in error and "definitely-the-secret" not in error
    client = as_user(operator)
    shown = [
        client.get(f"/api/v1/reviews/{review.id}").content.decode(),
        client.get(f"/reviews/{review.id}/").content.decode(),
        client.get("/ops/").content.decode(),
        caplog.text,
    ]
    assert all("definitely-the-secret" not in text for text in shown)
    assert "OPS_HOOK_SECRET" in shown[0] and "OPS_HOOK_SECRET" in shown[2]


def test_a_channel_that_is_down_decides_nothing_when_the_deadline_passes(
    harness_yaml, paused_review, monkeypatch, time_machine
):
    monkeypatch.setenv("OPS_HOOK_SECRET", SECRET)
    harness_yaml(RULES.replace("RECEIVER", "http://127.0.0.1:9/h"))
    review = paused_review()
    assert notification_send(notification_id=the_row(review).id) == "pending"
    assert ReviewRequest.objects.get(pk=review.pk).status == "pending"
    time_machine.move_to(review.expires_at, tick=False)
    assert reviews_expire_overdue() == 1
    review.refresh_from_db()
    # It expired by its own rule (reject), not because of the failing channel.
    assert review.status == "expired" and review.decided_by is None
    expired = Notification.objects.get(review=review, event="review.expired")
    assert expired.status == "pending"
