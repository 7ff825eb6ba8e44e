"""Collecting garbage: deleting the blobs whose counts stayed 0 for BLOB_GRACE_S and those
stored that long ago and never counted, except the snapshots other apps keep."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone
from django.utils.module_loading import import_string

from checkpoints.blobstore import BlobCorrupted, BlobMissing, batched, blob_store
from checkpoints.models import BlobRef
from checkpoints.retention.refcounts import KINDS, blobs_count
from checkpoints.snapshots import snapshot_blob_keys

BLOB_GRACE_S = 24 * 3600
# Snapshot roots kept by apps above this one, by dotted path (they import this app, not the
# other way round): the shared directories' snapshots of multi-agent global checkpoints.
BLOB_REFERRERS = ("multiagent.selectors.shared_snapshot_roots",)
# Blobs deleted per collection at most (candidates, then never-referenced blobs by age).
MAX_COLLECT_PER_RUN = 20_000


@dataclass(frozen=True)
class Collected:
    deleted: int
    # stored_at of the newest blob examined for never having been referenced: the next
    # collection goes on from there.
    orphans_after: str | None


def _referred_blobs() -> set[str]:
    """Every blob of the snapshots other apps keep (BLOB_REFERRERS), which are not counted."""
    keys: set[str] = set()
    for referrer in BLOB_REFERRERS:
        for root in import_string(referrer)():
            try:
                keys |= snapshot_blob_keys({"root": root})
            except (BlobMissing, BlobCorrupted):
                keys.add(root)  # a broken snapshot keeps whatever of it is left
    return keys


def blobs_collect_garbage(
    *, orphans_after: datetime | None = None, limit: int = MAX_COLLECT_PER_RUN
) -> Collected:
    """Delete the blobs nothing references, at most `limit`: those whose every count has been
    0 for BLOB_GRACE_S, then those stored before that and never counted at all (an upload
    whose checkpoint never committed), walking the store by age from `orphans_after`.

    Only once every checkpoint is counted (else nothing is deleted this time). The grace
    covers a capture that found a blob stored and names it in a checkpoint not counted yet
    (a worker trusts "already stored" for `checkpoints.snapshots.TRUST_STORED_S`, far less);
    the counts are brought up to date again right before deleting."""
    cursor = orphans_after.isoformat() if orphans_after else None
    if not blobs_count():
        return Collected(0, cursor)
    cutoff = timezone.now() - timedelta(seconds=BLOB_GRACE_S)
    dead = list(
        BlobRef.objects.filter(refs__lte=0, zero_since__lt=cutoff)
        .order_by("zero_since")
        .values_list("key", flat=True)[:limit]
    )
    dead_digests = {key.split(":", 1)[1] for key in dead}
    stored = blob_store().stored_between(orphans_after, cutoff, limit)
    walked = {key for key, _at in stored}
    if stored:
        cursor = max(at for _key, at in stored).isoformat()
    candidates = dead_digests | walked
    if not candidates or not blobs_count():
        return Collected(0, cursor)
    kinds = [f"{kind}:{digest}" for digest in candidates for kind in KINDS]
    counted: set[str] = set()
    live: set[str] = set()
    for batch in batched(kinds):
        for key, refs in BlobRef.objects.filter(key__in=batch).values_list("key", "refs"):
            counted.add(key.split(":", 1)[1])
            if refs > 0:
                live.add(key.split(":", 1)[1])
    # A blob whose count fell to 0 goes unless it is live as another kind; a blob from the
    # walk by age only when it was never counted (a counted one goes by its count).
    doomed = {d for d in dead_digests if d not in live} | (walked - counted)
    doomed -= _referred_blobs()
    deleted = blob_store().delete_many(doomed)
    BlobRef.objects.filter(key__in=[k for k in kinds if k.split(":", 1)[1] in doomed]).filter(
        refs__lte=0
    ).delete()
    return Collected(deleted, cursor)
