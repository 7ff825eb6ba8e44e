from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest

from harness_base.http import AuthedRequest
from review import services
from review.models import (
    DecisionLinkUse,
    DecisionReceipt,
    Notification,
    ReceiptChainHead,
    ReceiptVia,
    ReviewApproval,
    ReviewComment,
    ReviewDaily,
    ReviewerProfile,
    ReviewHourly,
    ReviewRequest,
    ReviewRolledHour,
    ReviewRule,
    ReviewTimeDaily,
    ReviewTimeHourly,
    ReviewView,
    RuleKind,
)


@admin.register(ReviewRule)
class ReviewRuleAdmin(admin.ModelAdmin):
    """Policy rules evaluated before harness.yaml's (a deny from either source wins), and the
    standing rules operators made from reviews (kind standing: pause, resume; review.standing)."""

    list_display = (
        "name",
        "kind",
        "position",
        "enabled",
        "paused",
        "until",
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
    list_filter = ("kind", "enabled", "paused", "action", "risk")
    search_fields = ("name", "tool", "reason")
    actions = ("pause_standing_rules", "resume_standing_rules")
    # Standing rules are made from reviews only; an admin-made rule is a policy rule.
    readonly_fields = (
        "kind",
        "pinned_arguments",
        "origin_review",
        "created_by",
        "created_at",
        "paused_at",
        "revoked_at",
        "revoked_reason",
        "revoked_by",
    )
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
        (
            "Standing rule (made from a review)",
            {
                "fields": (
                    "kind",
                    "url_origin",
                    "arguments_hash",
                    "pinned_arguments",
                    "scope",
                    "scope_user",
                    "until",
                    "paused",
                    "paused_reason",
                    "paused_at",
                    "revoked_at",
                    "revoked_reason",
                    "revoked_by",
                    "origin_review",
                    "created_by",
                    "created_at",
                )
            },
        ),
    )

    @admin.action(description="Pause the selected standing rules")
    def pause_standing_rules(self, request: AuthedRequest, queryset: QuerySet[ReviewRule]) -> None:
        paused = sum(
            services.standing_rule_pause(
                rule_id=rule.id,
                reason=f"paused in the admin by {request.user}",
                user=request.user,
                via=ReceiptVia.ADMIN,
            )
            for rule in queryset.filter(kind=RuleKind.STANDING, paused=False)
        )
        self.message_user(request, f"{paused} standing rule(s) paused.")

    @admin.action(description="Resume the selected standing rules")
    def resume_standing_rules(self, request: AuthedRequest, queryset: QuerySet[ReviewRule]) -> None:
        for rule in queryset.filter(kind=RuleKind.STANDING, paused=True):
            try:
                services.standing_rule_resume(
                    rule_id=rule.id,
                    user=request.user,
                    reason="resumed in the admin",
                    via=ReceiptVia.ADMIN,
                )
            except services.ReviewError as exc:
                self.message_user(request, exc.message, level=messages.WARNING)
            else:
                self.message_user(request, f"Standing rule {rule.name} resumed.")


class ReviewApprovalInline(admin.TabularInline):
    model = ReviewApproval
    extra = 0
    can_delete = False
    readonly_fields = ("user", "arguments_hash", "comment", "at")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
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

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [f.name for f in self.model._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class _ReadOnlyAdmin(admin.ModelAdmin):
    """Rows the harness writes itself (triage comments, decision receipts, delivery records,
    the receipt chain's head, page views, roll-ups): shown for inspection, never edited here."""

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [f.name for f in self.model._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(DecisionReceipt)
class DecisionReceiptAdmin(_ReadOnlyAdmin):
    """Read-only: receipts are appended by decisions and never changed (review.receipts)."""

    list_display = ("seq", "at", "decision", "via", "actor", "review_id", "task_id")
    list_filter = ("decision", "via")
    search_fields = ("actor",)
    date_hierarchy = "at"


for _model in (
    ReviewComment,
    ReceiptChainHead,
    Notification,
    DecisionLinkUse,
    ReviewView,
    ReviewRolledHour,
    ReviewHourly,
    ReviewTimeHourly,
    ReviewDaily,
    ReviewTimeDaily,
):
    if not admin.site.is_registered(_model):
        admin.site.register(_model, _ReadOnlyAdmin)


@admin.register(ReviewerProfile)
class ReviewerProfileAdmin(admin.ModelAdmin):
    """People's notification identities: the Slack user id whose clicks decide as the user
    (only an administrator sets or clears it, here: /preferences/ shows it read-only)."""

    list_display = ("user", "slack_user_id", "updated_at")
    search_fields = ("user__username", "user__email", "slack_user_id")
    autocomplete_fields = ("user",)

    def save_model(
        self, request: HttpRequest, obj: ReviewerProfile, form: Any, change: bool
    ) -> None:
        # Through the service: audited, with the administrator as the actor.
        by = request.user
        if not by.is_authenticated:  # the admin site lets only staff in
            raise PermissionDenied
        services.reviewer_slack_id_set(user=obj.user, slack_user_id=obj.slack_user_id, by=by)
