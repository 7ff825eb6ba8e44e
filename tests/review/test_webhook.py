"""The optional review webhook: a JSON message with a deep link when a review is requested."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

import pytest
import yaml

from tests.conftest import http_serving

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def webhook_config(settings, harness_yaml):
    """configure(url): the repository's harness.yaml plus `review_webhook_url: url`."""

    def configure(url: str) -> None:
        config = yaml.safe_load(settings.HARNESS_CONFIG_FILE.read_text())
        harness_yaml(yaml.safe_dump({**config, "review_webhook_url": url}))

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
    assert len(received) == 1
    message = received[0]
    assert message["event"] == "review_requested"
    assert message["review_id"] == review.id and message["tool"] == "delete_file"
    assert message["task_id"] == str(review.task_id)
    assert message["url"] == f"{settings.HARNESS_BASE_URL}/reviews/{review.id}/"


def test_a_broken_webhook_is_logged_and_the_pause_still_holds(
    webhook_config,
    paused_review,
    caplog,
):
    # Nothing listens on port 9 (discard) on loopback: the connection is refused at once.
    webhook_config("http://127.0.0.1:9/hook")
    review = paused_review()
    assert review.task.status == "waiting_review"
    assert any("review webhook" in r.getMessage() for r in caplog.records)
