"""Deploy checks (`manage.py check --deploy`): the development SECRET_KEY must never serve
beyond this machine; Django's own W009 does not flag it (it is long and varied)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, register

from harness_base.env import DEFAULT_SECRET_KEY


def secret_key_is_default() -> bool:
    return settings.SECRET_KEY == DEFAULT_SECRET_KEY


@register(Tags.security, deploy=True)
def default_secret_key_check(app_configs: Any, **kwargs: Any) -> list[Error]:
    if not secret_key_is_default():
        return []
    return [
        Error(
            "SECRET_KEY is the development default: anyone can forge sessions and tokens",
            hint="set SECRET_KEY to a long random value, e.g. "
            "`python -c 'import secrets; print(secrets.token_urlsafe(50))'`",
            id="harness.E001",
        )
    ]
