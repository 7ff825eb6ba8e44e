from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from review.models import ReviewApproval, ReviewRequest, ReviewRule


@admin.register(ReviewRule)
class ReviewRuleAdmin(admin.ModelAdmin):
    """Policy rules evaluated before harness.yaml's (a deny from either source wins)."""

    list_display = (
        "name",
        "position",
        "enabled",
        "action",
        "tool",
        "risk",
        "path_glob",
        "command_regex",
        "url_host",
        "expires_after",
        "on_expiry",
        "approvals_required",
        "forbid_creator",
    )
    list_editable = ("position", "enabled")
    list_filter = ("enabled", "action", "risk")
    search_fields = ("name", "tool", "reason")
    fieldsets = (
        (None, {"fields": ("name", "position", "enabled", "action", "reason")}),
        (
            "Match (empty fields match anything)",
            {"fields": ("tool", "risk", "path_glob", "command_regex", "url_host")},
        ),
        (
            "Review",
            {"fields": ("expires_after", "on_expiry", "approvals_required", "forbid_creator")},
        ),
    )


class ReviewApprovalInline(admin.TabularInline):
    model = ReviewApproval
    extra = 0
    can_delete = False
    readonly_fields = ("user", "arguments_hash", "comment", "at")

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


@admin.register(ReviewRequest)
class ReviewRequestAdmin(admin.ModelAdmin):
    """Read-only: decisions go through the review pages and API (locks, audit, resume)."""

    list_display = (
        "id",
        "tool",
        "risk",
        "status",
        "task",
        "requested_at",
        "expires_at",
        "decided_by",
        "decided_at",
    )
    list_filter = ("status", "risk", "tool", "kind")
    search_fields = ("task__title", "tool")
    date_hierarchy = "requested_at"
    inlines = [ReviewApprovalInline]

    def get_readonly_fields(self, request: HttpRequest, obj=None) -> list[str]:
        return [f.name for f in self.model._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False
