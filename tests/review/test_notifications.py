"""Notification channels with real processes: an SMTP server (aiosmtpd), HTTP receivers that
verify Standard Webhooks signatures and stand in for Slack, rqworker processes and the
`harness_sweep --loop` command. Each send is a Notification row; none changes the review."""

from __future__ import annotations

import base64
import email
import email.policy
import json
import os
import secrets
import subprocess
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from django.core.exceptions import ImproperlyConfigured
from standardwebhooks.webhooks import Webhook

from harness_base.config import load_config
from review.models import Notification, ReviewRequest
from review.notifications import notification_send, notifications_enqueue_due
from tasks.canonical import canonical_hash
from tests.conftest import approve, free_port, http_serving, manage_spawn, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

BASE_URL = "http://harness.example:8123"
SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()

RULES = """
review_rules:
  - {name: destructive, risk: destructive, action: review, reason: "Deletes data.",
     expires_after: EXPIRES}
"""


# --- receivers ------------------------------------------------------------------------------


class Receiver:
    """A loopback HTTP server recording each POST (headers, body); answers `status`."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.status = 204
        self.url = ""

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        bodies = [json.loads(item["body"]) for item in self.received]
        return [body for body in bodies if kind is None or body.get("type") == kind]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    state = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            state.received.append({"headers": dict(self.headers), "body": body.decode()})
            self.send_response(state.status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    with http_serving(Handler) as server:
        state.url = f"http://127.0.0.1:{server.server_port}/hook"
        yield state


class Mailbox:
    def __init__(self) -> None:
        self.messages: list[email.message.EmailMessage] = []

    async def handle_DATA(self, server, session, envelope) -> str:
        self.messages.append(
            email.message_from_bytes(envelope.content, policy=email.policy.default)
        )
        return "250 OK"


@pytest.fixture
def smtp_server() -> Iterator[tuple[int, Mailbox]]:
    """A real SMTP server on loopback (aiosmtpd), collecting what it receives."""
    mailbox = Mailbox()
    port = free_port()
    controller = Controller(mailbox, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield port, mailbox
    finally:
        controller.stop()


# --- processes ------------------------------------------------------------------------------


@pytest.fixture
def notify_env(settings, harness_dirs, harness_yaml, worker_pool, tmp_path: Path):
    """configure(yaml_text, **env): this test's harness.yaml and the environment of the
    workers and the sweeper (links at BASE_URL, fast retries)."""
    sweepers: list[subprocess.Popen] = []

    def configure(text: str, **env: str) -> None:
        path = harness_yaml(text)
        worker_pool.env.update(
            HARNESS_CONFIG=str(path),
            HARNESS_BASE_URL=BASE_URL,
            HARNESS_SWEEP_INTERVAL_S="0.2",
            HARNESS_NOTIFY_RETRY_S="0.2",
            **env,
        )

    def sweeper() -> subprocess.Popen:
        process = manage_spawn(
            ["harness_sweep", "--loop"], log=tmp_path / "sweeper.log", env=worker_pool.env
        )
        sweepers.append(process)
        return process

    configure.sweeper = sweeper  # type: ignore[attr-defined]
    yield configure
    for process in sweepers:
        process.kill()
        process.wait(timeout=10)
    sweep_log = tmp_path / "sweeper.log"
    if sweep_log.exists():
        print(sweep_log.read_text(errors="replace")[-3000:])


def rows(review: ReviewRequest) -> dict[tuple[str, str], Notification]:
    return {(n.channel, n.event): n for n in Notification.objects.filter(review=review)}


def sent(review: ReviewRequest, channel: str, event: str) -> Callable[[], bool]:
    def check() -> bool:
        row = rows(review).get((channel, event))
        return row is not None and row.status == "sent"

    check.__name__ = f"{event} to {channel} sent"
    return check


# --- configuration -----------------------------------------------------------------------


def test_the_issue_example_validates_and_bad_channels_name_the_field(tmp_path: Path):
    example = """
notifications:
  channels:
    ops-mail:  {kind: email, to: ["ops@example.com"]}
    ops-hook:  {kind: webhook, url: "https://hooks.example/x", secret_env: OPS_HOOK_SECRET}
    ops-slack:
      {kind: slack, webhook_url_env: SLACK_WEBHOOK_URL, signing_secret_env: SLACK_SIGNING_SECRET}
  routes:
    - match: {rule: protected-config}
      notify: [ops-mail, ops-hook]
      remind_before_s: 600
      escalate_after_s: 1800
      escalate_to: [ops-slack]
    - match: {}
      notify: [ops-mail]
"""
    path = tmp_path / "harness.yaml"
    path.write_text(example)
    config = load_config(path).notifications
    assert config.routes[0].escalate_to == ["ops-slack"]
    assert config.channels["ops-mail"].kind == "email"

    path.write_text(example.replace('"https://hooks.example/x"', '"ftp://hooks.example/x"'))
    with pytest.raises(ImproperlyConfigured, match=r"notifications\.channels\.ops-hook\.url:"):
        load_config(path)
    path.write_text(example.replace("notify: [ops-mail]", "notify: [ops-pager]"))
    with pytest.raises(ImproperlyConfigured, match="routes.1.notify: no channel named 'ops-pager'"):
        load_config(path)
    path.write_text(example.replace("secret_env: OPS_HOOK_SECRET", "secret_env: 'not a name'"))
    with pytest.raises(
        ImproperlyConfigured, match=r"notifications\.channels\.ops-hook\.secret_env"
    ):
        load_config(path)


# --- email ----------------------------------------------------------------------------------


def test_a_real_smtp_server_receives_the_email_with_the_review_link(
    notify_env, smtp_server, worker_pool, paused_review, operator, second_operator
):
    port, mailbox = smtp_server
    for user, address in ((operator, "oncall@example.com"), (second_operator, "dba@example.com")):
        user.email = address
        user.save(update_fields=["email"])
    notify_env(
        RULES.replace("EXPIRES", "1h")
        + """
notifications:
  channels:
    ops-mail: {kind: email, to: ["ops@example.com"]}
    operators-mail: {kind: email, group: operators}
  routes:
    - match: {rule: destructive}
      notify: [ops-mail, operators-mail]
""",
        EMAIL_HOST="127.0.0.1",
        EMAIL_PORT=str(port),
        DEFAULT_FROM_EMAIL="harness@example.com",
    )
    worker_pool.start(1)
    review = paused_review(title="Tidy <b>logs</b>\nBcc: victim@example.com")
    wait_for(sent(review, "ops-mail", "review.requested"), 30)
    wait_for(sent(review, "operators-mail", "review.requested"), 30)
    # The group's members get a message each (nobody sees who else was told).
    assert sorted(m["To"] for m in mailbox.messages) == [
        "dba@example.com",
        "oncall@example.com",
        "ops@example.com",
    ]
    # A line break in the title cannot add a header.
    assert all(m["Bcc"] is None and "\n" not in m["Subject"] for m in mailbox.messages)
    message = next(m for m in mailbox.messages if m["To"] == "ops@example.com")
    assert message["From"] == "harness@example.com"
    link = f"{BASE_URL}/reviews/{review.id}/"
    text = message.get_body(preferencelist=("plain",)).get_content()
    html = message.get_body(preferencelist=("html",)).get_content()
    for part in (text, html):
        assert link in part
        assert "delete_file" in part and "destructive" in part and "Deletes data." in part
        assert "old.log" in part  # the diff or command
    assert "Tidy <b>logs</b>" in text
    # The task's title is text in the HTML part, never markup.
    assert "Tidy &lt;b&gt;logs&lt;/b&gt;" in html and "<b>logs</b>" not in html
    assert ReviewRequest.objects.get(pk=review.pk).status == "pending"


# --- webhook --------------------------------------------------------------------------------

WEBHOOK = """
notifications:
  channels:
    ops-hook: {kind: webhook, url: "RECEIVER", secret_env: OPS_HOOK_SECRET}
  routes:
    - match: {tool: delete_file}
      notify: [ops-hook]
"""


def test_the_webhook_is_signed_per_standard_webhooks_and_reports_the_decision(
    notify_env, receiver, worker_pool, paused_review, operator
):
    notify_env(
        RULES.replace("EXPIRES", "1h") + WEBHOOK.replace("RECEIVER", receiver.url),
        OPS_HOOK_SECRET=SECRET,
    )
    worker_pool.start(1)
    review = paused_review()
    wait_for(sent(review, "ops-hook", "review.requested"), 30)
    delivery = receiver.received[0]
    # The receiver checks the signature with the shared secret, as the spec's libraries do.
    body = Webhook(SECRET).verify(delivery["body"], delivery["headers"])
    assert body["type"] == "review.requested"
    data = body["data"]
    assert data["review_id"] == review.id and data["task_id"] == str(review.task_id)
    assert (data["tool"], data["rule"], data["risk"]) == (
        "delete_file",
        "destructive",
        "destructive",
    )
    assert data["arguments_hash"] == canonical_hash(review.arguments)
    assert data["expires_at"] == review.expires_at.isoformat()
    assert data["url"] == f"{BASE_URL}/reviews/{review.id}/"
    # A forged body does not verify.
    with pytest.raises(Exception, match="signature"):
        Webhook(SECRET).verify(
            delivery["body"].replace("delete_file", "write_file"), delivery["headers"]
        )

    approve(review, operator)
    wait_for(sent(review, "ops-hook", "review.decided"), 30)
    decided = Webhook(SECRET).verify(
        receiver.received[-1]["body"], receiver.received[-1]["headers"]
    )
    assert decided["type"] == "review.decided" and decided["data"]["status"] == "approved"


def test_a_failing_receiver_leaves_the_review_pending_and_the_failure_visible(
    notify_env, receiver, worker_pool, paused_review, operator, as_user
):
    receiver.status = 500
    notify_env(
        RULES.replace("EXPIRES", "1h") + WEBHOOK.replace("RECEIVER", receiver.url),
        OPS_HOOK_SECRET=SECRET,
    )
    worker_pool.start(1)
    notify_env.sweeper()
    review = paused_review()

    def failing() -> Notification | None:
        row = rows(review)[("ops-hook", "review.requested")]
        return row if row.attempts >= 3 else None

    row = wait_for(failing, 60, message="three failed attempts")
    assert row.status in ("pending", "sending") and "HTTP 500" in row.last_error
    assert ReviewRequest.objects.get(pk=review.pk).status == "pending"
    assert review.task.__class__.objects.get(pk=review.task_id).status == "waiting_review"

    api = as_user(operator).get(f"/api/v1/reviews/{review.id}").json()
    assert api["status"] == "pending"
    (item,) = api["notifications"]
    assert item["channel"] == "ops-hook" and item["kind"] == "webhook"
    assert item["event"] == "review.requested" and item["attempts"] >= 3
    assert "HTTP 500" in item["last_error"] and item["sent_at"] is None

    page = as_user(operator).get(f"/reviews/{review.id}/").content.decode()
    assert 'data-testid="notifications"' in page and "HTTP 500" in page
    ops = as_user(operator).get("/ops/").content.decode()
    state = ops.split('data-testid="channel-state-ops-hook"')[1].split("</td>")[0]
    assert "failing" in state

    # The receiver recovers: the next retry delivers, and the channel is ok again.
    receiver.status = 204
    wait_for(sent(review, "ops-hook", "review.requested"), 60)
    ops = as_user(operator).get("/ops/").content.decode()
    assert "failing" not in ops.split('data-testid="channel-state-ops-hook"')[1].split("</td>")[0]


def test_a_missing_secret_is_named_at_send_time_and_on_ops_never_its_value(
    notify_env, receiver, worker_pool, paused_review, operator, as_user, monkeypatch
):
    monkeypatch.delenv("OPS_HOOK_SECRET", raising=False)
    notify_env(RULES.replace("EXPIRES", "1h") + WEBHOOK.replace("RECEIVER", receiver.url))
    worker_pool.env.pop("OPS_HOOK_SECRET", None)
    worker_pool.start(1)
    review = paused_review()
    row = wait_for(lambda: rows(review)[("ops-hook", "review.requested")].last_error or None, 30)
    assert row == "environment variable OPS_HOOK_SECRET (the webhook's signing secret) is not set"
    assert receiver.received == []
    ops = as_user(operator).get("/ops/").content.decode()
    assert "not set here: <code>OPS_HOOK_SECRET</code>" in ops


# --- slack ----------------------------------------------------------------------------------


def test_slack_receives_a_block_kit_message_with_approve_reject_and_link_buttons(
    notify_env, receiver, worker_pool, paused_review
):
    notify_env(
        RULES.replace("EXPIRES", "1h")
        + """
notifications:
  channels:
    ops-slack:
      {kind: slack, webhook_url_env: SLACK_WEBHOOK_URL, signing_secret_env: SLACK_SIGNING_SECRET}
  routes:
    - match: {}
      notify: [ops-slack]
""",
        SLACK_WEBHOOK_URL=receiver.url,
        SLACK_SIGNING_SECRET="not-used-for-sending",
    )
    worker_pool.start(1)
    review = paused_review()
    wait_for(sent(review, "ops-slack", "review.requested"), 30)
    message = json.loads(receiver.received[0]["body"])
    assert f"{BASE_URL}/reviews/{review.id}/" in message["text"]
    text = json.dumps(message["blocks"])
    assert "delete_file" in text and "destructive" in text and "old.log" in text
    (actions,) = [block for block in message["blocks"] if block["type"] == "actions"]
    buttons = {button["action_id"]: button for button in actions["elements"]}
    assert set(buttons) == {"review_approve", "review_reject", "review_open"}
    expected = {
        "review_id": review.id,
        "arguments_hash": canonical_hash(review.arguments),
    }
    assert json.loads(buttons["review_approve"]["value"]) == expected
    assert json.loads(buttons["review_reject"]["value"]) == expected
    assert buttons["review_open"]["url"] == f"{BASE_URL}/reviews/{review.id}/"


# --- reminders and escalation ------------------------------------------------------------


def test_reminder_and_escalation_arrive_once_each_across_a_killed_worker(
    notify_env, receiver, worker_pool, paused_review, operator
):
    # Expires after 60 s: the reminder is due 4 s after the review opens, the escalation 8 s.
    notify_env(
        RULES.replace("EXPIRES", "60s")
        + """
notifications:
  channels:
    ops-hook: {kind: webhook, url: "RECEIVER", secret_env: OPS_HOOK_SECRET}
    ops-slack: {kind: slack, webhook_url_env: SLACK_WEBHOOK_URL}
  routes:
    - match: {rule: destructive}
      notify: [ops-hook]
      remind_before_s: 56
      escalate_after_s: 8
      escalate_to: [ops-slack]
""".replace("RECEIVER", receiver.url),
        OPS_HOOK_SECRET=SECRET,
        SLACK_WEBHOOK_URL=receiver.url + "/slack",
    )
    (first,) = worker_pool.start(1)
    notify_env.sweeper()
    review = paused_review()
    wait_for(sent(review, "ops-hook", "review.reminder"), 60)
    assert not rows(review)[("ops-slack", "review.escalated")].sent_at
    worker_pool.kill(first)
    worker_pool.start(1)
    wait_for(sent(review, "ops-slack", "review.escalated"), 60)
    approve(review, operator)
    wait_for(sent(review, "ops-hook", "review.decided"), 30)

    kinds = [json.loads(item["body"]).get("type", "slack") for item in receiver.received]
    assert kinds.count("review.requested") == 1
    assert kinds.count("review.reminder") == 1
    assert kinds.count("slack") == 1  # the escalation, to Slack
    assert kinds.count("review.decided") == 1
    (escalation,) = [
        body for body in map(json.loads, (i["body"] for i in receiver.received)) if "blocks" in body
    ]
    assert "Escalated" in escalation["blocks"][0]["text"]["text"]
    # However often the sweep looks later, nothing is due again.
    assert notifications_enqueue_due(now=review.expires_at) == 0
    assert ReviewRequest.objects.get(pk=review.pk).status == "approved"


def test_a_decided_review_cancels_its_reminder_and_escalation(
    harness_yaml, paused_review, operator
):
    harness_yaml(
        RULES.replace("EXPIRES", "1h")
        + """
notifications:
  channels:
    ops-hook: {kind: webhook, url: "http://127.0.0.1:9/hook", secret_env: OPS_HOOK_SECRET}
  routes:
    - match: {}
      notify: [ops-hook]
      remind_before_s: 600
      escalate_after_s: 60
      escalate_to: [ops-hook]
"""
    )
    review = paused_review()
    assert {key: row.status for key, row in rows(review).items()} == {
        ("ops-hook", "review.requested"): "pending",
        ("ops-hook", "review.reminder"): "pending",
        ("ops-hook", "review.escalated"): "pending",
    }
    approve(review, operator)
    statuses = {key: row.status for key, row in rows(review).items()}
    assert statuses[("ops-hook", "review.reminder")] == "canceled"
    assert statuses[("ops-hook", "review.escalated")] == "canceled"
    assert statuses[("ops-hook", "review.decided")] == "pending"
    # Long after the reminder's time, the sweep finds nothing more to send than the rows
    # already due (the request and the decision).
    due = notifications_enqueue_due(now=review.expires_at)
    assert due == 2


def test_an_unreachable_channel_never_decides_or_expires_the_review(
    harness_yaml, paused_review, settings
):
    harness_yaml(
        RULES.replace("EXPIRES", "1h")
        + """
notifications:
  channels:
    ops-hook: {kind: webhook, url: "http://127.0.0.1:9/hook", secret_env: OPS_HOOK_SECRET}
  routes:
    - match: {}
      notify: [ops-hook]
"""
    )
    os.environ["OPS_HOOK_SECRET"] = SECRET
    try:
        settings.HARNESS_NOTIFY_MAX_ATTEMPTS = 2
        review = paused_review()
        row = rows(review)[("ops-hook", "review.requested")]
        assert notification_send(notification_id=row.id) == "pending"
        Notification.objects.filter(pk=row.pk).update(next_attempt_at=review.requested_at)
        assert notification_send(notification_id=row.id) == "failed"
    finally:
        del os.environ["OPS_HOOK_SECRET"]
    row.refresh_from_db()
    assert row.status == "failed" and row.attempts == 2 and "ConnectError" in row.last_error
    review.refresh_from_db()
    assert review.status == "pending" and review.task.status == "waiting_review"
