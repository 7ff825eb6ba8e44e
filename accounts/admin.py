from django.contrib import admin

from accounts.models import SsoIdentity


@admin.register(SsoIdentity)
class SsoIdentityAdmin(admin.ModelAdmin):
    """Read-only: identities are written by sign-ins (accounts.flows.oidc_login)."""

    list_display = ("user", "issuer", "subject", "roles", "last_login_at")
    search_fields = ("user__username", "subject")
    readonly_fields = (
        "user",
        "issuer",
        "subject",
        "groups",
        "roles",
        "created_at",
        "last_login_at",
    )

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
