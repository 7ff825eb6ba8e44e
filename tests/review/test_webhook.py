"""The deprecated `review_webhook_url`: still an unsigned JSON message with a deep link when a
review is requested, now sent by a worker as a notification channel of its own."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

import pytest
import yaml

from tests.conftest import http_serving, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def webhook_config(settings, harness_yaml, harness_dirs, worker_pool):
    """configure(url): the repository's harness.yaml plus `review_webhook_url: url`, here and
    in a running worker."""

    def configure(url: str) -> None:
        config = yaml.safe_load(settings.HARNESS_CONFIG_FILE.read_text())
        path = harness_yaml(yaml.safe_dump({**config, "review_webhook_url": url}))
        worker_pool.env["HARNESS_CONFIG"] = str(path)
        worker_pool.start(1)

    return configure


@pytest.fixture
def receiver():
    """A local HTTP server that records the JSON bodies POSTed to it."""
    received: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append(json.loads(body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    with http_serving(Handler) as server:
        yield f"http://127.0.0.1:{server.server_port}/hook", received


def test_a_paused_call_notifies_the_webhook_with_a_deep_link(
    webhook_config,
    receiver,
    paused_review,
    settings,
):
    url, received = receiver
    webhook_config(url)
    review = paused_review()
    wait_for(lambda: received, 30, message="the webhook message")
    message = received[0]
    assert message["event"] == "review_requested"
    assert message["review_id"] == review.id and message["tool"] == "delete_file"
    assert message["task_id"] == str(review.task_id)
    assert message["url"] == f"{settings.HARNESS_BASE_URL}/reviews/{review.id}/"


def test_a_broken_webhook_is_recorded_and_the_pause_still_holds(
    webhook_config,
    paused_review,
):
    # Nothing listens on port 9 (discard) on loopback: the connection is refused at once.
    webhook_config("http://127.0.0.1:9/hook")
    review = paused_review()
    row = wait_for(
        lambda: (
            review.notifications.filter(channel="review_webhook_url", attempts=1)
            .exclude(last_error="")
            .first()
        ),
        30,
        message="the failed attempt",
    )
    assert row.event == "review.requested" and "ConnectError" in row.last_error
    review.refresh_from_db()
    assert review.status == "pending" and review.task.status == "waiting_review"
