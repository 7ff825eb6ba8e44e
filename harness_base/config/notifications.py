"""The `notifications` section: the channels (email, webhook, Slack) and the routes that pick
them for a review."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StringConstraints, field_validator, model_validator

from harness_base.config.fields import EnvName, Strict, parse_duration

ChannelName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]


def _http_url(value: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise ValueError("must be an http:// or https:// URL")
    return value


HttpUrl = Annotated[str, StringConstraints(max_length=2000), AfterValidator(_http_url)]


class EmailChannelConfig(Strict):
    """Mail through Django's email backend (EMAIL_HOST... from the environment): to `to`, or
    to the members of `group` who have an email address."""

    kind: Literal["email"]
    to: list[Annotated[str, StringConstraints(pattern=r"^[^@\s]+@[^@\s]+$")]] = []
    group: str | None = Field(default=None, min_length=1, max_length=150)

    @model_validator(mode="after")
    def _recipients(self) -> EmailChannelConfig:
        if bool(self.to) == (self.group is not None):
            raise ValueError("give exactly one of 'to' (addresses) or 'group' (a group's members)")
        return self


class WebhookChannelConfig(Strict):
    """A JSON POST signed per Standard Webhooks with the secret in the env var `secret_env`."""

    kind: Literal["webhook"]
    url: HttpUrl
    secret_env: EnvName


class SlackChannelConfig(Strict):
    """A Block Kit message to the incoming webhook whose URL is in `webhook_url_env`, or, with
    `channel` (a Slack channel id) and `bot_token_env`, by chat.postMessage to that channel:
    then a message already sent is updated in place (chat.update) when an approval edits the
    review's arguments. `signing_secret_env` names the variable holding the app's signing
    secret and `bot_token_env` its bot token (users.info, scope users:read.email; chat:write
    for `channel`): button clicks are taken only with both (review/slack.py)."""

    kind: Literal["slack"]
    webhook_url_env: EnvName | None = None
    channel: str | None = Field(default=None, pattern=r"^[A-Z0-9]{2,40}$")
    signing_secret_env: EnvName | None = None
    bot_token_env: EnvName | None = None

    @model_validator(mode="after")
    def _destination(self) -> SlackChannelConfig:
        if self.channel is not None and self.bot_token_env is None:
            raise ValueError("'channel' posts with the bot token: give 'bot_token_env' too")
        if (self.webhook_url_env is None) == (self.channel is None):
            raise ValueError(
                "give exactly one of 'webhook_url_env' (an incoming webhook) or 'channel' "
                "(a channel id, posted to with the bot token)"
            )
        return self


CHANNEL_KINDS = ("email", "webhook", "slack")
ChannelConfig = Annotated[
    EmailChannelConfig | WebhookChannelConfig | SlackChannelConfig, Field(discriminator="kind")
]


class RouteMatch(Strict):
    """Every key given must match: a rule the review matched, its tool, its risk, a group of
    the task's creator. `{}` matches every review."""

    rule: str | None = None
    tool: str | None = None
    risk: Literal["read", "write", "execute", "external", "destructive"] | None = None
    group: str | None = None


class RouteConfig(Strict):
    match: RouteMatch = RouteMatch()
    notify: list[ChannelName] = Field(min_length=1)
    # A reminder to `notify` this long before the review expires (reviews that expire).
    remind_before_s: float | None = Field(default=None, gt=0)
    # Still pending this long after it opened: `escalate_to` is notified as well.
    escalate_after_s: float | None = Field(default=None, gt=0)
    escalate_to: list[ChannelName] = []

    @field_validator("remind_before_s", "escalate_after_s", mode="before")
    @classmethod
    def _duration(cls, value: object) -> float | None:
        return None if value is None else parse_duration(value)

    @model_validator(mode="after")
    def _escalation(self) -> RouteConfig:
        if (self.escalate_after_s is None) != (not self.escalate_to):
            raise ValueError("give 'escalate_after_s' and 'escalate_to' together")
        return self


class NotificationsConfig(Strict):
    """Who hears of a review (review/notifications/): the first route whose `match` fits."""

    channels: dict[ChannelName, ChannelConfig] = {}
    routes: list[RouteConfig] = []

    @model_validator(mode="after")
    def _known_channels(self) -> NotificationsConfig:
        for index, route in enumerate(self.routes):
            for key in ("notify", "escalate_to"):
                for name in getattr(route, key):
                    if name not in self.channels:
                        raise ValueError(
                            f"routes.{index}.{key}: no channel named {name!r} in "
                            f"notifications.channels"
                        )
        return self
