from __future__ import annotations

from django.contrib import admin

from checkpoints.models import (
    Blob,
    BlobRef,
    Checkpoint,
    GraphBlob,
    GraphCheckpoint,
    GraphWorkspace,
    GraphWrite,
    VersionBody,
)
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


@admin.register(BlobRef)
class BlobRefAdmin(ReadOnlyAdmin):
    """Reference counts kept by retention; a blob whose count stayed 0 is collected."""

    list_display = ("key", "refs", "zero_since")
    list_filter = ("zero_since",)
    search_fields = ("key",)


@admin.register(GraphCheckpoint)
class GraphCheckpointAdmin(ReadOnlyAdmin):
    """LangGraph's own checkpoints, written only by checkpoints.langgraph's saver."""

    list_display = ("thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id", "task")
    search_fields = ("thread_id", "checkpoint_id")
    exclude = ("checkpoint",)
    raw_id_fields = ("task",)


@admin.register(GraphBlob)
class GraphBlobAdmin(ReadOnlyAdmin):
    list_display = ("thread_id", "checkpoint_ns", "channel", "version", "type")
    search_fields = ("thread_id", "channel")
    exclude = ("blob",)


@admin.register(GraphWrite)
class GraphWriteAdmin(ReadOnlyAdmin):
    list_display = ("thread_id", "checkpoint_id", "graph_task_id", "idx", "channel", "type")
    search_fields = ("thread_id", "checkpoint_id")


@admin.register(GraphWorkspace)
class GraphWorkspaceAdmin(ReadOnlyAdmin):
    """The workspace snapshot the graph runner captured with each graph checkpoint."""

    list_display = ("task", "checkpoint_id", "created_at")
    search_fields = ("task__id", "checkpoint_id")
    exclude = ("snapshot",)
    raw_id_fields = ("task",)
    list_select_related = ("task",)


@admin.register(VersionBody)
class VersionBodyAdmin(ReadOnlyAdmin):
    list_display = ("sha256", "created_at")
    search_fields = ("sha256",)
