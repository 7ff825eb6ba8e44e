from __future__ import annotations

from django.contrib import admin

from checkpoints.models import Blob, Checkpoint
from tasks.admin import ReadOnlyAdmin


@admin.register(Checkpoint)
class CheckpointAdmin(ReadOnlyAdmin):
    """Append-only: rollback and retention go through checkpoints services."""

    list_display = (
        "name",
        "task",
        "seq",
        "level",
        "trigger",
        "step_index",
        "size_bytes",
        "superseded",
        "created_at",
    )
    list_filter = ("level", "trigger", "superseded")
    search_fields = ("task__id", "checksum")
    exclude = ("payload",)
    raw_id_fields = ("task", "parent")
    list_select_related = ("task",)


@admin.register(Blob)
class BlobAdmin(ReadOnlyAdmin):
    list_display = ("sha256", "size", "created_at")
    search_fields = ("sha256",)
    exclude = ("data",)
