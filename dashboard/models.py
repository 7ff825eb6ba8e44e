"""What each person chose for their own pages (the rest of the dashboard reads other apps'
models)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class UserPreference(models.Model):
    """One row per user who changed a default. `time_zone`: an IANA name the pages show times
    in, overriding the browser's zone; blank follows the browser."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        primary_key=True,
        on_delete=models.CASCADE,
        related_name="harness_preference",
    )
    time_zone = models.CharField(max_length=64, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.user_id}: {self.time_zone or 'browser time zone'}"
