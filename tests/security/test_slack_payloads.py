"""Attacks on the Slack actions endpoint with correctly signed but malformed payloads (the
signing secret is the only thing they share with Slack): every one is a 4xx naming the field,
never a 500, and decides nothing. And the other direction: every text the harness gives Slack
(the blocks, the fallback `text`, the answer to a click) is escaped, so a task title cannot
ping a channel (`<!channel>`) or turn into a link."""

from __future__ import annotations

import dataclasses
import json
import re
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlencode

import pytest
from django.utils import timezone

from harness_base.config import SlackChannelConfig
from review.notifications.messages import review_message
from review.transports.slack import Slack, slack_blocks
from tasks.canonical import canonical_hash
from tests.conftest import http_serving
from tests.security.test_slack_actions import (  # noqa: F401  (shared fixtures)
    post,
    review,
    signed,
    slack,
    slack_operator,
    state_of,
)

pytestmark = pytest.mark.django_db(transaction=True)

HASH = "0" * 64
DEEP = "[" * 20_000 + "]" * 20_000


def payload(**changes: Any) -> dict[str, Any]:
    value = json.dumps({"review_id": 1, "arguments_hash": HASH})
    base: dict[str, Any] = {
        "type": "block_actions",
        "user": {"id": "U_OPS"},
        "response_url": "https://hooks.slack.com/actions/T1/1/x",
        "actions": [{"action_id": "review_approve", "value": value}],
    }
    return {**base, **changes}


def form(data: Any) -> bytes:
    return urlencode({"payload": data if isinstance(data, str) else json.dumps(data)}).encode()


def action(**changes: Any) -> list[dict[str, Any]]:
    return [{"action_id": "review_approve", "value": "", **changes}]


MALFORMED = {
    "user is a string": form(payload(user="U_OPS")),
    "user is a list": form(payload(user=["U_OPS"])),
    "user is null": form(payload(user=None)),
    "user id is a number": form(payload(user={"id": 7})),
    "user id is an object": form(payload(user={"id": {"id": "U_OPS"}})),
    "user id holds a NUL": form(payload(user={"id": "U_OPS\u0000"})),
    "user id is a lone surrogate": form(payload(user={"id": "\ud800"})),
    "actions is an object": form(payload(actions={"action_id": "review_approve"})),
    "actions is a string": form(payload(actions="review_approve")),
    "actions holds a number": form(payload(actions=[1])),
    "actions is empty": form(payload(actions=[])),
    "two actions": form(payload(actions=action() * 2)),
    "action_id is a list": form(payload(actions=action(action_id=["review_approve"]))),
    "action_id is an object": form(payload(actions=action(action_id={"a": 1}))),
    "value is a number": form(payload(actions=action(value=5))),
    "value is an object": form(payload(actions=action(value={"review_id": 1}))),
    "value is not JSON": form(payload(actions=action(value="{"))),
    "value nested too deep": form(payload(actions=action(value=DEEP[:900] + DEEP[-900:]))),
    "review_id past bigint": form(
        payload(actions=action(value=json.dumps({"review_id": 2**70, "arguments_hash": HASH})))
    ),
    "review_id is a bool": form(
        payload(actions=action(value=json.dumps({"review_id": True, "arguments_hash": HASH})))
    ),
    "arguments_hash is a number": form(
        payload(actions=action(value=json.dumps({"review_id": 1, "arguments_hash": 5})))
    ),
    "response_url is a number": form(payload(response_url=5)),
    "response_url is a lone surrogate": form(payload(response_url="https://\ud800/")),
    "type is a list": form(payload(type=["block_actions"])),
    "payload is a list": form([payload()]),
    "payload is a string": form(json.dumps("block_actions")),
    "payload nested too deep": form(DEEP[:10_000] + DEEP[-10_000:]),
    "deep inside a valid payload": form(
        json.dumps(payload())[:-1] + ', "x": ' + DEEP[:9000] + DEEP[-9000:] + "}"
    ),
    "not UTF-8": b"payload=\xff\xfe" + json.dumps(payload()).encode(),
    "percent-encoded non-UTF-8": b"payload=%FF%FE%FD",
    "huge number": form('{"type": "block_actions", "n": ' + "9" * 5000 + "}"),
}


@pytest.mark.parametrize("body", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_signed_malformed_payload_is_a_4xx_and_decides_nothing(
    slack,  # noqa: F811  (the imported fixture)
    slack_operator,  # noqa: F811
    review,  # noqa: F811
    body,
):
    response = post(body, signed(body))
    assert 400 <= response.status_code < 500, response.content[:300]
    assert "payload" in response.json()["text"]
    assert state_of(review) == ("pending", 0, "waiting_review")
    assert slack.responses == [] and slack.tokens == []


def test_the_field_is_named(slack):  # noqa: F811
    body = form(payload(user="U_OPS"))
    assert post(body, signed(body)).json()["text"].startswith("payload.user:")
    body = form(payload(actions=action(action_id=["x"])))
    assert post(body, signed(body)).json()["text"].startswith("payload.actions[0].action_id:")


TITLE = "<!channel> urgent & <https://evil.example|click here>"


@pytest.fixture
def slack_receiver():
    received: list[dict[str, Any]] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    with http_serving(Receiver) as server:
        yield f"http://127.0.0.1:{server.server_port}/hook", received


def _texts(value: Any) -> list[str]:
    """Every `text` string anywhere in a Slack message."""
    if isinstance(value, dict):
        return [
            t
            for k, v in value.items()
            for t in ([v] if k == "text" and isinstance(v, str) else _texts(v))
        ]
    if isinstance(value, list):
        return [t for item in value for t in _texts(item)]
    return []


def test_every_text_slack_shows_is_escaped_the_fallback_included(
    slack_receiver, paused_review, monkeypatch
):
    url, received = slack_receiver
    monkeypatch.setenv("T_SLACK_HOOK", url)
    paused = paused_review(title=TITLE)
    message = review_message(review=paused, event="review.requested", now=timezone.now())
    Slack(SlackChannelConfig(kind="slack", webhook_url_env="T_SLACK_HOOK")).notify(
        message=message, delivery_id="d1"
    )
    [body] = received
    assert "&lt;!channel&gt; urgent &amp; &lt;https://evil.example|click here&gt;" in body["text"]
    header = body["blocks"][0]["text"]["text"]
    assert header == message.title  # an event title, escaped (it holds none of & < >)
    for text in _texts(body):
        assert "<!channel>" not in text and "<https://evil" not in text, text
    assert canonical_hash(paused.arguments) in json.dumps(body)  # the buttons still bind


def test_an_escaped_preview_stays_within_slack_s_block_limits(paused_review):
    """A diff of an HTML file is mostly `<` and `>`: escaped after the cut, it grew to four
    times Slack's 3,000-character section limit, and Slack refuses the whole message (the
    reviewer is never told). Every text is cut as sent, and no entity is split."""
    paused = paused_review(title="<b>" * 60)
    message = review_message(review=paused, event="review.requested", now=timezone.now())
    message = dataclasses.replace(message, preview="<p>&amp;</p>\n" * 1000)
    blocks = slack_blocks(message)
    assert "&lt;b&gt;" * 60 in json.dumps(blocks)  # the task title, whole
    preview = next(t for t in _texts(blocks) if t.startswith("```"))
    assert preview.startswith("```&lt;p&gt;&amp;amp;&lt;/p&gt;")
    for text in _texts(blocks):
        assert len(text) <= 3000, len(text)
        assert not re.search(r"&(?!amp;|lt;|gt;)", text), "an entity was split"
