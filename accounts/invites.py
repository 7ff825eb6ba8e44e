"""The one-time link an invited person sets their password with: Django's password-reset
token machinery under its own salt (a reset link is no invite link, nor the other way round).
The token is bound to the account's password hash, last sign-in and active flag, so setting
the password, signing in or being deactivated uses it up; it expires after
PASSWORD_RESET_TIMEOUT seconds (Django's setting, three days unless set)."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.contrib.auth.tokens import PasswordResetTokenGenerator
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode


class InviteTokenGenerator(PasswordResetTokenGenerator):
    key_salt = "accounts.invites.InviteTokenGenerator"

    def _make_hash_value(self, user: User, timestamp: int) -> str:
        return f"{super()._make_hash_value(user, timestamp)}{int(user.is_active)}"


invite_tokens = InviteTokenGenerator()


def invite_path(*, user: User) -> str:
    """The path of a fresh one-time link for `user` (shown once, to the admin who invited)."""
    uidb64 = urlsafe_base64_encode(force_bytes(user.pk))
    return reverse(
        "invite_confirm", kwargs={"uidb64": uidb64, "token": invite_tokens.make_token(user)}
    )
