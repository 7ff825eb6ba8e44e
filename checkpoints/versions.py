"""The bodies behind the hashes in `versions` (Checkpoint.versions, GraphCheckpoint.versions,
ReviewRequest.versions; computed by agent.versions): stored once per sha256, read back by a
drift review to show an old schema beside the new one; and the versions a task's head
checkpoint was written with."""

from __future__ import annotations

import threading
from typing import Any

from django.db import transaction
from django.db.models import F

from checkpoints.models import Checkpoint, GraphCheckpoint, VersionBody

# The bodies this process knows to be stored (after their write committed): a run's pick-up
# then inserts nothing when its code has not changed since the last one.
_stored: set[str] = set()
_stored_lock = threading.Lock()


def version_bodies_store(*, bodies: dict[str, Any]) -> None:
    """Insert the bodies (sha256 -> body) not stored yet; one INSERT, none if all are known."""
    with _stored_lock:
        new = {key: body for key, body in bodies.items() if key not in _stored}
    if not new:
        return
    VersionBody.objects.bulk_create(
        [VersionBody(sha256=key, body=body) for key, body in new.items()],
        ignore_conflicts=True,
    )

    def remember() -> None:
        with _stored_lock:
            _stored.update(new)

    transaction.on_commit(remember)


def version_bodies_forget() -> None:
    """Forget which bodies are stored: the next write inserts its bodies again (ignoring those
    present). For a database emptied under a running process (tests, a restore)."""
    with _stored_lock:
        _stored.clear()


def version_body(sha256: str) -> dict[str, Any] | None:
    """The body a hash in `versions` stands for (a list, for an MCP server's tools, comes
    wrapped: {"tools": [...]}), or None when it was never stored."""
    return VersionBody.objects.filter(sha256=sha256).values_list("body", flat=True).first()


def checkpoint_versions(*, task_id: Any) -> dict[str, Any]:
    """The versions the task's head was written with: its head checkpoint's, or for a graph
    task the latest graph checkpoint's; {} when it has none (not started, or written before
    versions were recorded)."""
    head = (
        Checkpoint.objects.filter(task_id=task_id, task__head_checkpoint_id=F("id"))
        .values_list("versions", flat=True)
        .first()
    )
    if head:
        versions: dict[str, Any] = head
        return versions
    # The saver's index (thread, ns, checkpoint id): LangGraph's ids sort by time.
    graph = (
        GraphCheckpoint.objects.filter(thread_id=str(task_id), checkpoint_ns="")
        .order_by("-checkpoint_id")
        .values_list("versions", flat=True)
        .first()
    )
    return graph or {}


def graph_checkpoint_versions(*, task_id: Any, checkpoint_id: str) -> dict[str, Any]:
    """The versions one of a graph task's checkpoints was written with ({} if not recorded)."""
    found = (
        GraphCheckpoint.objects.filter(
            thread_id=str(task_id), checkpoint_ns="", checkpoint_id=checkpoint_id
        )
        .values_list("versions", flat=True)
        .first()
    )
    return found or {}
