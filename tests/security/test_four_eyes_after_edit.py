"""Four eyes after an edit (issue 41): under a rule that needs two approvals, the first
operator approves with edited arguments. Every channel that can then offer the second approval
(Slack, email and its confirmation page, the webhook, the inbox and bulk approval) must show the
effect of exactly the arguments its action binds, the edit and who made it, or offer no
one-click decision: otherwise the second person approves a call only the first one read.

A loopback HTTP server stands in for Slack's Web API (users.info, chat.postMessage,
chat.update), its response_urls and a webhook receiver; mail goes to Django's test outbox."""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.core import mail

from review.email_links import decision_link_urls
from review.models import Notification, ReviewRequest
from review.notifications import notification_send
from tasks.canonical import canonical_hash
from tasks.models import Task, ToolCall
from tests.conftest import ApiClient, approve, http_serving, page_client
from tests.factories import ReviewRuleFactory
from tests.security.test_slack_actions import SIGNING_SECRET, click, post, signed

pytestmark = pytest.mark.django_db(transaction=True)

HOOK_SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()
CONFIG = """
notifications:
  channels:
    ops-slack: {kind: slack, channel: C0OPS, signing_secret_env: T_SLACK_SIGNING,
                bot_token_env: T_SLACK_BOT}
    old-slack: {kind: slack, webhook_url_env: T_SLACK_HOOK}
    ops-mail: {kind: email, to: [ops2@example.com]}
    ops-hook: {kind: webhook, url: "URL/hook", secret_env: T_HOOK_SECRET}
  routes:
    - {notify: [ops-slack, old-slack, ops-mail, ops-hook]}
"""
PROPOSED = {"path": "old.log"}
EDITED = {"path": "keep.log"}


class SlackStandIn:
    """Slack's Web API as far as the harness uses it, recording every call by method; POSTs
    to /respond (response_urls), /hook (the incoming webhook) and /receiver (a webhook
    channel) are recorded too."""

    def __init__(self) -> None:
        self.users: dict[str, str] = {}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.responses: list[dict[str, Any]] = []
        self.url = ""

    @property
    def response_url(self) -> str:
        return f"{self.url}/respond/T1"

    def called(self, method: str) -> list[dict[str, Any]]:
        return [body for name, body in self.calls if name == method]


@pytest.fixture
def stand_in(monkeypatch, settings, harness_yaml) -> Iterator[SlackStandIn]:
    state = SlackStandIn()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, answer: dict[str, Any]) -> None:
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self.do_POST()

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
            path, _, query = self.path.partition("?")
            if self.headers.get("Content-Type", "").startswith("application/json"):
                body = json.loads(raw)
            else:
                body = {k: v[0] for k, v in parse_qs(f"{raw}&{query}").items()}
            method = path.rsplit("/", 1)[-1]
            state.calls.append((method if path.startswith("/api/") else path, body))
            if path.startswith("/respond/"):
                state.responses.append(body)
                return self._answer({})
            if method == "users.info":
                email = state.users.get(body["user"])
                return self._answer(
                    {"ok": True, "user": {"id": body["user"], "profile": {"email": email}}}
                    if email
                    else {"ok": False, "error": "user_not_found"}
                )
            if method in ("chat.postMessage", "chat.update"):
                ts = body.get("ts") or f"1700000000.{len(state.calls):06d}"
                return self._answer({"ok": True, "channel": body["channel"], "ts": ts})
            return self._answer({})

        def log_message(self, *args) -> None:
            pass

    with http_serving(Handler) as server:
        state.url = f"http://127.0.0.1:{server.server_port}"
        settings.HARNESS_SLACK_API_URL = f"{state.url}/api/"
        monkeypatch.setenv("T_SLACK_HOOK", f"{state.url}/slack-hook")
        monkeypatch.setenv("T_SLACK_SIGNING", SIGNING_SECRET)
        monkeypatch.setenv("T_SLACK_BOT", "xoxb-test-token")
        monkeypatch.setenv("T_HOOK_SECRET", HOOK_SECRET)
        harness_yaml(CONFIG.replace("URL", state.url))
        yield state


@pytest.fixture
def review(stand_in, paused_review):
    """A delete that needs two approvals (the creator may give one), of old.log; keep.log is
    what the first approver's edit deletes instead."""
    ReviewRuleFactory(
        name="two-person-delete", tool="delete_file", approvals_required=2, forbid_creator=False
    )
    return paused_review(files={"old.log": "stale\n", "keep.log": "evidence\n"})


@pytest.fixture
def ops2(stand_in, second_operator):
    second_operator.email = "ops2@example.com"
    second_operator.save(update_fields=["email"])
    stand_in.users["U_OPS2"] = "ops2@example.com"
    return second_operator


def send(review: ReviewRequest, event: str) -> None:
    """Send the review's notifications of `event` now, as the send job does."""
    rows = Notification.objects.filter(review=review, event=event)
    assert rows.exists(), f"no {event} notification"
    for row in rows:
        assert notification_send(notification_id=row.id) == "sent", row.last_error


def blocks_text(blocks: list[dict[str, Any]]) -> str:
    return json.dumps(blocks, ensure_ascii=False)


def button_hashes(blocks: list[dict[str, Any]]) -> set[str]:
    return {
        json.loads(element["value"])["arguments_hash"]
        for block in blocks
        if block["type"] == "actions"
        for element in block["elements"]
        if "value" in element
    }


def state_of(review: ReviewRequest) -> tuple[str, int]:
    review.refresh_from_db()
    return review.status, review.approvals.count()


def test_slack_messages_show_the_edit_and_a_stale_button_decides_nothing(
    stand_in, review, operator, ops2
):
    send(review, "review.requested")
    [first] = stand_in.called("chat.postMessage")
    sent = Notification.objects.get(review=review, channel="ops-slack", event="review.requested")
    assert sent.slack_channel == "C0OPS" and sent.slack_ts
    assert button_hashes(first["blocks"]) == {canonical_hash(PROPOSED)}

    approve(review, operator, arguments=EDITED)
    assert state_of(review) == ("pending", 1)
    send(review, "review.edited")
    # The message already in the channel is rewritten in place, not joined by another.
    [update] = stand_in.called("chat.update")
    assert len(stand_in.called("chat.postMessage")) == 1
    assert (update["channel"], update["ts"]) == ("C0OPS", sent.slack_ts)
    text = blocks_text(update["blocks"])
    assert "-evidence" in text and "-stale" not in text
    assert "Edited by operator" in text and 'path: \\"old.log\\" → \\"keep.log\\"' in text
    assert button_hashes(update["blocks"]) == {canonical_hash(EDITED)}
    # A channel reached by an incoming webhook (no update possible) gets the edited call.
    [replacement] = [b for path, b in stand_in.calls if path == "/slack-hook"][-1:]
    assert "-evidence" in blocks_text(replacement["blocks"])
    assert button_hashes(replacement["blocks"]) == {canonical_hash(EDITED)}

    # The second operator clicks Approve on a copy of the message sent before the edit.
    body = click(stand_in, review, slack_user="U_OPS2", arguments_hash=canonical_hash(PROPOSED))
    response = post(body, signed(body))
    assert response.status_code == 200
    assert response.json()["text"].startswith("Nothing was decided")
    assert state_of(review) == ("pending", 1)
    # ...and the message clicked is replaced by the review as it is now.
    [replaced] = [r for r in stand_in.responses if r.get("replace_original")]
    assert "-evidence" in blocks_text(replaced["blocks"])
    assert button_hashes(replaced["blocks"]) == {canonical_hash(EDITED)}


def test_the_mail_and_its_confirmation_page_show_the_edited_call(review, operator, ops2):
    approve(review, operator, arguments=EDITED)
    mail.outbox.clear()
    send(review, "review.edited")
    [message] = [m for m in mail.outbox if m.to == ["ops2@example.com"]]
    assert "Edited by operator" in message.body and '"old.log" → "keep.log"' in message.body
    assert "-evidence" in message.body and "-stale" not in message.body
    approve_path = urlsplit(message.body.split("Approve: ")[1].split()[0]).path

    client = page_client(ops2)
    page = client.get(approve_path)
    assert page.status_code == 200
    html = page.content.decode()
    for shown in ("link-edited", "Edited by operator", "keep.log", "-evidence"):
        assert shown in html, shown
    assert canonical_hash(EDITED)[:12] in html and "-stale" not in html
    assert client.post(approve_path).status_code == 302
    assert state_of(review) == ("approved", 2)
    call = ToolCall.objects.get(pk=review.tool_call_id)
    assert call.arguments == EDITED


def test_a_link_mailed_before_the_edit_shows_the_edit_and_decides_nothing(review, operator, ops2):
    before = urlsplit(
        decision_link_urls(
            review_id=review.id, arguments_hash=canonical_hash(PROPOSED), email=ops2.email
        )["approve"]
    ).path
    approve(review, operator, arguments=EDITED)
    client = page_client(ops2)
    page = client.get(before)
    assert page.status_code == 409
    assert "Edited by operator" in page.content.decode() and "keep.log" in page.content.decode()
    assert client.post(before).status_code == 409
    assert state_of(review) == ("pending", 1)


def test_the_webhook_after_an_edit_carries_the_edited_preview_and_the_edit(
    stand_in, review, operator
):
    approve(review, operator, arguments=EDITED)
    send(review, "review.edited")
    [payload] = [b for path, b in stand_in.calls if path == "/hook"]
    data = payload["data"]
    assert payload["type"] == "review.edited"
    assert data["arguments_hash"] == canonical_hash(EDITED)
    assert "-evidence" in data["preview"] and "-stale" not in data["preview"]
    assert data["edited"]["by"] == "operator" and data["edited"]["at"]
    assert data["edited"]["changes"] == [
        {"argument": "path", "proposed": "old.log", "edited": "keep.log"}
    ]


def test_bulk_approval_of_an_edited_review_is_refused_unless_it_names_the_edit(
    review, paused_review, operator, ops2
):
    approve(review, operator, arguments=EDITED)
    edited = canonical_hash(EDITED)
    api = ApiClient(ops2)
    bulk = "/api/v1/reviews/bulk-decision"
    response = api.post(
        bulk, {"decision": "approve", "items": [{"id": review.id, "arguments_hash": edited}]}
    )
    [result] = response.json()["results"]
    assert (result["ok"], result["status_code"]) == (False, 409)
    assert "edited by operator" in result["error"] and "edited_arguments_hash" in result["error"]
    assert state_of(review) == ("pending", 1)

    # The inbox row says who edited and offers no tick; a forged tick is refused the same way.
    inbox = page_client(ops2).get("/reviews/").content.decode()
    row = inbox.split(f'data-review-id="{review.id}"')[1].split("</tr>")[0]
    assert "edited by operator" in row and 'data-testid="bulk-item"' not in row
    forged = page_client(ops2).post(
        "/reviews/bulk/",
        {"decision": "approve", "item": [f"{review.id}:{edited}"], "unopened": "confirmed"},
        follow=True,
    )
    assert f"#{review.id} its arguments were edited by operator" in forged.content.decode()
    assert state_of(review) == ("pending", 1)

    named = api.post(
        bulk,
        {
            "decision": "approve",
            "items": [{"id": review.id, "arguments_hash": edited, "edited_arguments_hash": edited}],
        },
    )
    assert named.json()["results"][0]["ok"]
    assert state_of(review) == ("approved", 2)
    assert Task.objects.get(pk=review.task_id).status == "queued"
