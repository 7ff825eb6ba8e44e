"""`retention_run`, the sweep's periodic job: count, thin, and now and then collect."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Any

from checkpoints.retention.collection import blobs_collect_garbage
from checkpoints.retention.refcounts import blobs_count
from checkpoints.retention.thinning import checkpoints_apply_retention


def retention_run(*, state: dict[str, Any], collect_garbage: bool) -> dict[str, Any]:
    """The sweep's periodic job: `state` is what the previous run returned ({} the first
    time); the result is recorded by the sweep and handed to the next run. Every run counts
    the snapshots written since the last one (bounded); `collect_garbage` also collects."""
    cursor = state.get("cursor")
    # Counted first, so that thinning uncounts what it deletes.
    blobs_count()
    result = checkpoints_apply_retention(since=datetime.fromisoformat(cursor) if cursor else None)
    out = asdict(result)
    if collect_garbage:
        after = state.get("orphans_after")
        collected = blobs_collect_garbage(
            orphans_after=datetime.fromisoformat(after) if after else None
        )
        out |= {"blobs_deleted": collected.deleted, "orphans_after": collected.orphans_after}
    elif state.get("orphans_after"):
        out["orphans_after"] = state["orphans_after"]
    return out
