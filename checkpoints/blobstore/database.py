"""Blobs in the database: DatabaseBlobStore (the `Blob` table) and DeferredBlobStore (new
blobs kept as unsaved rows for the caller's own transaction)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

from django.db.models import Sum
from django.db.models.functions import Length

from checkpoints.blobstore.base import BlobStore, batched
from checkpoints.models import Blob


class DatabaseBlobStore(BlobStore):
    """Blobs as rows of `checkpoints.Blob` (sha256 primary key)."""

    def missing(self, keys: Iterable[str]) -> set[str]:
        wanted = set(keys)
        for batch in batched(list(wanted)):
            wanted.difference_update(
                Blob.objects.filter(sha256__in=batch).values_list("sha256", flat=True)
            )
        return wanted

    def _write(self, blobs: Mapping[str, tuple[bytes, int]]) -> None:
        rows = [Blob(sha256=key, size=size, data=data) for key, (data, size) in blobs.items()]
        # ON CONFLICT DO NOTHING: a blob is immutable, so whoever stored it first wins.
        Blob.objects.bulk_create(rows, batch_size=200, ignore_conflicts=True)

    def _read(self, keys: list[str]) -> dict[str, bytes]:
        return {
            key: bytes(data)
            for key, data in Blob.objects.filter(sha256__in=keys).values_list("sha256", "data")
        }

    def stored_size(self, keys: Iterable[str]) -> int:

        total = 0
        for batch in batched(set(keys)):
            total += (
                Blob.objects.filter(sha256__in=batch).aggregate(n=Sum(Length("data")))["n"] or 0
            )
        return total

    def keys_older_than(self, moment: datetime) -> Iterator[str]:
        yield from (
            Blob.objects.filter(created_at__lt=moment)
            .values_list("sha256", flat=True)
            .iterator(chunk_size=2000)
        )

    def delete_many(self, keys: Iterable[str]) -> int:
        deleted = 0
        for batch in batched(keys):
            deleted += Blob.objects.filter(sha256__in=batch).delete()[0]
        return deleted

    def stored_between(self, start: datetime | None, end: datetime, limit: int) -> list[Any]:
        rows = Blob.objects.filter(created_at__lt=end)
        if start is not None:
            rows = rows.filter(created_at__gt=start)
        return list(rows.order_by("created_at").values_list("sha256", "created_at")[:limit])


class DeferredBlobStore(BlobStore):
    """A DatabaseBlobStore whose new blobs, up to `limit` compressed bytes in all, are kept as
    unsaved `Blob` rows in `rows` ({key: row}) instead of stored: the caller inserts them in
    its own transaction, with the checkpoint that references them (unless present: a blob is
    immutable). Blobs beyond the limit are stored at once. A kept key is not `missing`."""

    def __init__(self, store: BlobStore, rows: dict[str, Blob], limit: int) -> None:
        self.store = store
        self.rows = rows
        self.limit = limit

    def missing(self, keys: Iterable[str]) -> set[str]:
        return self.store.missing(set(keys) - self.rows.keys())

    def put_absent(self, blobs: Mapping[str, bytes]) -> None:
        """New blobs that fit in what is left of the limit are kept without asking whether
        the store has them: their insert skips those it has (ON CONFLICT DO NOTHING), which
        costs less than the round trip of asking (a step's file and chunks, typically)."""
        if self._kept_bytes() + sum(len(content) for content in blobs.values()) <= self.limit:
            self.put_many({key: content for key, content in blobs.items() if key not in self.rows})
        else:
            super().put_absent(blobs)

    def _kept_bytes(self) -> int:
        return sum(len(row.data) for row in self.rows.values())

    def _write(self, blobs: Mapping[str, tuple[bytes, int]]) -> None:
        kept = self._kept_bytes()
        now: dict[str, tuple[bytes, int]] = {}
        for key, (data, size) in blobs.items():
            if key in self.rows:
                continue
            if kept + len(data) > self.limit:
                now[key] = (data, size)
                continue
            self.rows[key] = Blob(sha256=key, size=size, data=data)
            kept += len(data)
        if now:
            self.store._write(now)

    def _read(self, keys: list[str]) -> dict[str, bytes]:
        found = self.store._read([key for key in keys if key not in self.rows])
        found.update({key: bytes(self.rows[key].data) for key in keys if key in self.rows})
        return found

    def stored_size(self, keys: Iterable[str]) -> int:
        return self.store.stored_size(keys)

    def keys_older_than(self, moment: datetime) -> Iterator[str]:
        return self.store.keys_older_than(moment)

    def delete_many(self, keys: Iterable[str]) -> int:
        return self.store.delete_many(keys)
