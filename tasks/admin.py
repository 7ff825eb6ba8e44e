"""Admin for the task models. Read-only: state changes go through services (the state
machine, the audit log), never through a form that assigns fields."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from tasks.models import (
    ApiToken,
    AuditEntry,
    RolledHour,
    SweepRun,
    Task,
    TaskDaily,
    TaskEvent,
    TaskHourly,
    TaskWaitDaily,
    TaskWaitHourly,
    ToolCall,
    ToolCallDaily,
    ToolCallDurationDaily,
    ToolCallDurationHourly,
    ToolCallHourly,
    ToolCallStepDaily,
    ToolCallStepHourly,
    ToolOutput,
)


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Task)
class TaskAdmin(ReadOnlyAdmin):
    list_display = (
        "title",
        "status",
        "current_step",
        "attempt",
        "error_class",
        "created_by",
        "created_at",
        "finished_at",
    )
    list_filter = ("status", "priority", "error_class")
    search_fields = ("id", "title")
    date_hierarchy = "created_at"
    list_select_related = ("created_by",)
    raw_id_fields = ("head_checkpoint", "created_by")


@admin.register(ToolOutput)
class ToolOutputAdmin(ReadOnlyAdmin):
    list_display = ("id", "task", "call_id", "attempt", "name", "kind", "size", "stored")
    list_filter = ("kind", "partial")
    search_fields = ("task__id", "call_id")
    raw_id_fields = ("task",)
    # The stored bytes are compressed: the task page shows the text and serves the download.
    exclude = ("data",)


@admin.register(TaskEvent)
class TaskEventAdmin(ReadOnlyAdmin):
    list_display = ("id", "task", "type", "step_index", "actor", "created_at")
    list_filter = ("type",)
    search_fields = ("task__id",)
    raw_id_fields = ("task",)
    list_select_related = ("task",)


@admin.register(ToolCall)
class ToolCallAdmin(ReadOnlyAdmin):
    list_display = ("call_id", "task", "tool", "status", "attempts", "error_class", "created_at")
    list_filter = ("tool", "status", "risk")
    search_fields = ("call_id", "task__id")
    raw_id_fields = ("task",)
    list_select_related = ("task",)


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    list_display = ("at", "actor_name", "action", "target", "reason")
    list_filter = ("action",)
    search_fields = ("actor_name", "target", "reason")
    date_hierarchy = "at"
    raw_id_fields = ("task", "actor")


@admin.register(SweepRun)
class SweepRunAdmin(ReadOnlyAdmin):
    list_display = ("name", "finished_at", "duration_ms", "runs", "counts", "host")


@admin.register(RolledHour)
class RolledHourAdmin(ReadOnlyAdmin):
    list_display = ("hour", "unsettled", "stale", "rolled_at")
    date_hierarchy = "hour"


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are created with `manage.py createapitoken`; here they can only be revoked."""

    list_display = ("prefix", "user", "name", "created_at", "last_used_at", "revoked")
    list_filter = ("revoked",)
    search_fields = ("prefix", "user__username", "name")
    fields = ("prefix", "user", "name", "created_at", "last_used_at", "revoked")
    readonly_fields = ("prefix", "user", "name", "created_at", "last_used_at")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


# The roll-up tables, per hour and per day (tasks.models.rollups): (hourly, daily, the counts
# listed after the period and the key, the filters).
ROLLUP_ADMINS = (
    (TaskHourly, TaskDaily, ("tasks",), ("status",)),
    (TaskWaitHourly, TaskWaitDaily, ("tasks",), ("kind",)),
    (ToolCallHourly, ToolCallDaily, ("calls",), ("tool", "status")),
    (ToolCallStepHourly, ToolCallStepDaily, ("calls", "failed"), ()),
    (ToolCallDurationHourly, ToolCallDurationDaily, ("calls",), ("tool",)),
)


def _rollup_admins_register() -> None:
    for hourly, daily, counts, filters in ROLLUP_ADMINS:
        for model, period in ((hourly, "hour"), (daily, "day")):
            fields = {"list_display": (period, *model.KEY, *counts), "list_filter": filters}
            admin.site.register(model, type(f"{model.__name__}Admin", (ReadOnlyAdmin,), fields))


_rollup_admins_register()
