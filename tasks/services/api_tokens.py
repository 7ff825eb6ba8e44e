"""API tokens: creating one (only its hash is stored), hashing a presented one,
remembering when one was last used, and revoking a user's all at once."""

from __future__ import annotations

import hashlib
import secrets

from django.contrib.auth.models import User
from django.utils import timezone

from tasks.models import ApiToken


def api_token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def api_token_create(*, user: User, name: str = "") -> str:
    token = "hk_" + secrets.token_urlsafe(32)
    ApiToken.objects.create(
        user=user, name=name, token_hash=api_token_hash(token), prefix=token[:10]
    )
    return token


def api_token_used(*, token: ApiToken) -> None:
    """Remember when the token was last used, at most once a minute (one UPDATE then)."""
    now = timezone.now()
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)


def api_tokens_revoke(*, user: User) -> int:
    """Revoke every token of `user` (deactivated on /people/); how many were live."""
    return ApiToken.objects.filter(user_id=user.pk, revoked=False).update(revoked=True)
