"""Decisions from a Slack message's buttons (issue 23): the interactivity endpoint
`POST /integrations/slack/actions/` hands each request here.

A request is taken only if it carries Slack's signature (`v0=` HMAC-SHA256 of
`v0:{timestamp}:{body}` with the app's signing secret, slack_sdk's SignatureVerifier) made
with the signing secret of a configured Slack channel, less than five minutes ago; anything
else is refused before the body is read. The clicker is a Slack user id: the harness user
who set that id on their profile decides; failing that, users.info (the channel's bot token,
scope users:read.email) gives their email, and the one active harness user with that verified
email decides (review.identities), through `review_decide` with the `arguments_hash`
the button carries, so every check of the page holds (stale arguments, expiry, roles,
four-eyes, the creator ban). A button whose hash is no longer the review's (an approval
edited the arguments after the message was sent) decides nothing, and the message it was on
is replaced by the review's message as it is now. Nobody else decides anything: an unknown
Slack user, an email shared by two accounts, a viewer. A replayed request is the same user
deciding again: `review_decide` refuses a second approval and any decision on a closed review.

The answer (what was decided, or why nothing was) is the JSON body of the response, and goes
back as an ephemeral message to the request's `response_url` only if that is on Slack's own
host (hooks.slack.com, or the host of HARNESS_SLACK_API_URL): the URL comes inside the request,
and the harness posts to no other host on a request's say.

Not done: a stored nonce per request within the five minutes. A request replayed in that window
is the same user deciding again, which review_decide refuses."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from django.conf import settings

if TYPE_CHECKING:
    from django.contrib.auth.models import User
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from slack_sdk.errors import SlackApiError
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web import WebClient

from harness_base.config import SlackChannelConfig, harness_config
from review.identities import user_for_slack_id, users_with_verified_email
from review.models import SLACK_USER_ID, ReceiptVia, ReviewRequest, ReviewStatus
from review.selectors.page import review_url
from review.services.decide import review_decide
from review.services.errors import ReviewConflict, ReviewError
from review.slack_answers import SLACK_TIMEOUT_S, slack_respond
from review.transports.slack import slack_escape

log = logging.getLogger(__name__)

ACTIONS = {"review_approve": "approve", "review_reject": "reject"}
# Slack's request bodies are small; anything larger is not Slack's.
BODY_MAX_BYTES = 64 * 1024


@dataclass(frozen=True, kw_only=True)
class SlackReply:
    status: int
    text: str


def _verified_channel(*, body: str, headers: Any) -> SlackChannelConfig | None:
    """The Slack channel whose signing secret signed this request within the last 5 min."""
    timestamp = headers.get("X-Slack-Request-Timestamp") or ""
    signature = headers.get("X-Slack-Signature") or ""
    if not timestamp.isdigit() or not signature:
        return None
    for channel in harness_config().notifications.channels.values():
        if not isinstance(channel, SlackChannelConfig) or not channel.signing_secret_env:
            continue
        secret = os.environ.get(channel.signing_secret_env, "")
        if secret.strip() and SignatureVerifier(secret).is_valid(
            body=body, timestamp=timestamp, signature=signature
        ):
            return channel
    return None


class _Strict(BaseModel):
    # Slack's own types, never coerced: a number where Slack sends a string is not Slack's.
    model_config = ConfigDict(strict=True, extra="ignore")


class _SlackUserRef(_Strict):
    id: str = Field(pattern=SLACK_USER_ID)


class _Action(_Strict):
    action_id: str = Field(max_length=255)
    value: str = Field(default="", max_length=2000)


class _Payload(_Strict):
    type: str = Field(max_length=100)
    user: _SlackUserRef
    actions: list[_Action] = Field(min_length=1, max_length=1)
    response_url: str | None = Field(default=None, max_length=2000)


class _ButtonValue(_Strict):
    review_id: int = Field(ge=1, le=2**63 - 1)
    arguments_hash: str = Field(pattern="^[0-9a-f]{64}$")


def _first_error(exc: ValidationError, *, prefix: str) -> str:
    error = exc.errors()[0]
    where = ".".join([prefix, *(f"[{p}]" if isinstance(p, int) else str(p) for p in error["loc"])])
    return f"{where.replace('.[', '[')}: {error['msg']}"


def _payload(body: str) -> _Payload:
    """The block_actions payload of a signed form body, or ValueError naming the field. Any
    shape is refused as a 4xx: wrong types, a nesting too deep for the parser."""
    try:
        form = parse_qs(body, strict_parsing=True)
        raw = json.loads(form["payload"][0])
    except (ValueError, KeyError, RecursionError):
        raise ValueError("payload: a form field holding Slack's JSON") from None
    if not isinstance(raw, dict):
        raise ValueError("payload: a form field holding Slack's JSON")
    if raw.get("type") != "block_actions":
        raise ValueError("payload.type: only block_actions are taken")
    try:
        return _Payload.model_validate(raw)
    except ValidationError as exc:
        raise ValueError(_first_error(exc, prefix="payload")) from None


def _action(payload: _Payload) -> tuple[str, int, str]:
    """(decision, review id, arguments_hash) of the button, or ValueError naming the field."""
    action = payload.actions[0]
    decision = ACTIONS.get(action.action_id)
    if decision is None:
        raise ValueError("payload.actions[0].action_id: review_approve or review_reject")
    try:
        value = _ButtonValue.model_validate_json(action.value)
    except ValidationError as exc:
        raise ValueError(_first_error(exc, prefix="payload.actions[0].value")) from None
    return decision, value.review_id, value.arguments_hash


def slack_user(*, channel: SlackChannelConfig, slack_user_id: str) -> User | str:
    """The harness user a Slack user is, or why there is none: the one who set this Slack
    user id on their profile (it wins), else the one account whose verified email is the one
    users.info gives (review.identities)."""
    mapped = user_for_slack_id(slack_user_id=slack_user_id)
    if mapped is not None:
        return mapped
    token = os.environ.get(channel.bot_token_env or "", "")
    if not token:
        return (
            "this Slack app has no bot token configured (bot_token_env), so its users "
            "cannot be told apart"
        )
    client = WebClient(
        token=token, base_url=settings.HARNESS_SLACK_API_URL, timeout=SLACK_TIMEOUT_S
    )
    try:
        info = client.users_info(user=slack_user_id)
    except SlackApiError as exc:
        return f"Slack did not say who you are ({exc.response.get('error', 'error')})"
    except OSError as exc:
        return f"Slack could not be asked who you are ({type(exc).__name__})"
    slack = info.get("user")
    profile = slack.get("profile") if isinstance(slack, dict) else None
    email = profile.get("email") if isinstance(profile, dict) else None
    if (
        not isinstance(slack, dict)
        or not isinstance(email, str)
        or not email
        or slack.get("deleted")
        or slack.get("is_bot")
    ):
        return "your Slack profile has no email address the harness can see"
    users = users_with_verified_email(email=email)
    if len(users) != 1:
        return (
            f"no harness account has your Slack email {email} as its verified email"
            if not users
            else f"more than one harness account has the email {email}"
        )
    return users[0]


def _decide(*, user: User, decision: str, review_id: int, arguments_hash: str) -> tuple[str, bool]:
    """(the answer, whether the button was stale: it binds arguments the review no longer
    has, because an approval edited them after the message was sent)."""
    url = review_url(review_id=review_id)
    try:
        review = review_decide(
            review_id=review_id,
            user=user,
            decision=decision,
            arguments_hash=arguments_hash,
            via=ReceiptVia.SLACK,
        )
    except ReviewRequest.DoesNotExist:
        return f"Nothing was decided: there is no review {review_id}.", False
    except ReviewConflict as exc:
        if any(error.get("field") == "arguments_hash" for error in exc.errors):
            return (
                "Nothing was decided: the call's arguments changed since this message was "
                f"sent (the message now shows the call as it is). Open the review: {url}",
                True,
            )
        return f"Nothing was decided: {exc.message}. {url}", False
    except ReviewError as exc:
        return f"Nothing was decided: {exc.message}. {url}", False
    who = user.get_username()
    if review.status == ReviewStatus.PENDING:
        return (
            f"Approval by {who} recorded ({review.approvals.count()} of "
            f"{review.approvals_required}); another operator must approve too. {url}",
            False,
        )
    return f"Review {review.id} ({review.tool}) {review.status} by {who}. {url}", False


def slack_action_handle(*, body: bytes, headers: Any) -> SlackReply:
    """One interactivity request: verify, parse, map the user, decide, answer."""
    if len(body) > BODY_MAX_BYTES:
        return SlackReply(status=413, text="request body too large")
    try:
        # Slack's form bodies are ASCII; slack_sdk's verifier takes text (it failed on bytes
        # that are not UTF-8, before any signature was checked).
        text_body = body.decode()
    except UnicodeDecodeError:
        return SlackReply(status=400, text="payload: the body is not UTF-8")
    channel = _verified_channel(body=text_body, headers=headers)
    if channel is None:
        return SlackReply(
            status=401,
            text="not signed by a configured Slack app (X-Slack-Signature), or signed more "
            "than 5 minutes ago (X-Slack-Request-Timestamp)",
        )
    try:
        payload = _payload(text_body)
        decision, review_id, arguments_hash = _action(payload)
    except ValueError as exc:
        return SlackReply(status=400, text=str(exc))
    slack_user_id = payload.user.id
    user = slack_user(channel=channel, slack_user_id=slack_user_id)
    stale = False
    if isinstance(user, str):
        text = f"Nothing was decided: {user}."
    else:
        text, stale = _decide(
            user=user, decision=decision, review_id=review_id, arguments_hash=arguments_hash
        )
    text = slack_escape(text)
    if payload.response_url is not None:
        slack_respond(
            response_url=payload.response_url,
            text=text,
            replace_with=review_id if stale else None,
        )
    return SlackReply(status=200, text=text)
