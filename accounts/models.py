from __future__ import annotations

from django.conf import settings
from django.db import models


class SsoIdentity(models.Model):
    """The identity provider's account (`iss`, `sub`) behind a user: the only thing a login
    is matched by (an email the IdP lets people change would let one take another's
    account). Holds what the last login asserted and the roles it mapped to."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sso_identity"
    )
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    created_at = models.DateTimeField(auto_now_add=True)
    # None until the first sign-in of an identity an admin created ahead of it (/people/).
    last_login_at = models.DateTimeField(null=True, blank=True)
    # The groups claim and the roles it mapped to at the last login (the stored mapping that
    # the approval re-check reads, through the user's groups).
    groups = models.JSONField(default=list)
    roles = models.JSONField(default=list)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="sso_identity_iss_sub")
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"
