"""Content-addressed blob stores for workspace snapshots (DESIGN §4).

The backend is chosen by dotted path in `settings.HARNESS_BLOB_STORE`:

- `checkpoints.blobstore.DatabaseBlobStore` (default) keeps blobs in the `Blob` table, so any
  worker on any machine that reaches the database can materialise a workspace;
- `checkpoints.blobstore.FilesystemBlobStore` keeps them as files under
  `settings.HARNESS_BLOB_DIR` (a shared volume when workers run on several machines).

The contract every backend honours (tests/checkpoints/test_blobstore.py runs one contract
test against each backend):

- a key is the sha256 hex digest of the *uncompressed* content; callers pass it in because
  they have already hashed the content while reading it;
- `put_many({key: content})` stores each content once, zlib-compressed; putting a key that is
  already stored is a no-op, and concurrent puts of the same key are safe;
- `missing(keys)` returns the subset of keys not stored, in one round trip per batch; it is
  how callers upload only what is new;
- `get_many(keys)` returns {key: content} decompressed and verified against the key; a key
  not stored raises `BlobMissing`, stored bytes that do not hash to their key raise
  `BlobCorrupted`; `get` and `has` are the single-key forms;
- `stored_size(keys)` is the number of bytes the backend holds for those keys (compressed);
- `keys_older_than(moment)` yields the keys stored before `moment` and `delete_many(keys)`
  removes blobs (missing keys are ignored): together they let retention collect garbage.

Backends implement the storage primitives (`_write`, `_read`, `missing`, `stored_size`); the
base class owns compression and verification so every backend behaves the same.
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
import zlib
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.models import Sum
from django.db.models.functions import Length
from django.utils.module_loading import import_string

from checkpoints.models import Blob

# Rows per IN (...) query: well under PostgreSQL's and SQLite's parameter limits.
BATCH = 900
COMPRESS_LEVEL = 6


class BlobMissing(KeyError):
    """Some keys are not in the store."""

    def __init__(self, keys: Iterable[str]) -> None:
        self.keys = sorted(keys)
        super().__init__(f"{len(self.keys)} blob(s) missing, e.g. {self.keys[0][:12]}")


class BlobCorrupted(ValueError):
    """Stored bytes no longer hash to their key."""


def blob_key(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def batched(items: Iterable[str], size: int = BATCH) -> Iterator[list[str]]:
    batch: list[str] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


class BlobStore(ABC):
    """Base contract for blob stores; see the module docstring."""

    # -- backend primitives ------------------------------------------------------------

    @abstractmethod
    def missing(self, keys: Iterable[str]) -> set[str]:
        """The keys among `keys` that are not stored."""

    @abstractmethod
    def _write(self, blobs: Mapping[str, tuple[bytes, int]]) -> None:
        """Store {key: (compressed bytes, uncompressed size)}; existing keys are left alone."""

    @abstractmethod
    def _read(self, keys: list[str]) -> dict[str, bytes]:
        """{key: compressed bytes} for the keys that are stored (absent keys are omitted)."""

    @abstractmethod
    def stored_size(self, keys: Iterable[str]) -> int:
        """Bytes held for these keys (compressed), for storage accounting."""

    @abstractmethod
    def keys_older_than(self, moment: datetime) -> Iterator[str]:
        """Keys of blobs stored before `moment`."""

    @abstractmethod
    def delete_many(self, keys: Iterable[str]) -> int:
        """Delete these blobs (absent keys are ignored); -> how many were deleted."""

    def stored_between(self, start: datetime | None, end: datetime, limit: int) -> list[Any]:
        """Up to `limit` (key, stored at) of the blobs stored after `start` (None: from the
        first) and before `end`, oldest first: retention walks the store once, in bounded
        steps, for blobs nothing ever referenced (a cut inside blobs stored at one instant
        skips the rest of them: they are kept)."""
        raise NotImplementedError

    # -- the public contract -----------------------------------------------------------

    def put_many(self, blobs: Mapping[str, bytes]) -> None:
        if not blobs:
            return
        self._write(
            {
                key: (zlib.compress(content, COMPRESS_LEVEL), len(content))
                for key, content in blobs.items()
            }
        )

    def put_absent(self, blobs: Mapping[str, bytes]) -> None:
        """Store the blobs the store lacks: one existence check, then only those are
        compressed and sent."""
        if blobs:
            absent = self.missing(blobs)
            self.put_many({key: blobs[key] for key in absent})

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        wanted = list(dict.fromkeys(keys))
        found: dict[str, bytes] = {}
        for batch in batched(wanted):
            found.update(self._read(batch))
        absent = set(wanted) - found.keys()
        if absent:
            raise BlobMissing(absent)
        out = {}
        for key, data in found.items():
            try:
                content = zlib.decompress(data)
            except zlib.error:
                raise BlobCorrupted(f"blob {key[:12]}: unreadable") from None
            if blob_key(content) != key:
                raise BlobCorrupted(f"blob {key[:12]}: content does not match its hash")
            out[key] = content
        return out

    def get(self, key: str) -> bytes:
        return self.get_many([key])[key]

    def has(self, key: str) -> bool:
        return not self.missing([key])


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


class FilesystemBlobStore(BlobStore):
    """Blobs as files `<root>/<key[:2]>/<key[2:]>`, written atomically (temp file + rename)."""

    def __init__(self, root: Path | str | None = None) -> None:
        self._root = root

    @property
    def root(self) -> Path:
        return Path(self._root if self._root is not None else settings.HARNESS_BLOB_DIR)

    def _path(self, key: str) -> Path:
        if len(key) != 64 or not all(c in "0123456789abcdef" for c in key):
            raise ValueError(f"not a sha256 hex key: {key!r}")
        return self.root / key[:2] / key[2:]

    def missing(self, keys: Iterable[str]) -> set[str]:
        return {key for key in set(keys) if not self._path(key).exists()}

    def _write(self, blobs: Mapping[str, tuple[bytes, int]]) -> None:
        for key, (data, _size) in blobs.items():
            target = self._path(key)
            if target.exists():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                os.replace(tmp, target)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise

    def _read(self, keys: list[str]) -> dict[str, bytes]:
        out = {}
        for key in keys:
            try:
                out[key] = self._path(key).read_bytes()
            except FileNotFoundError:
                continue
        return out

    def stored_size(self, keys: Iterable[str]) -> int:
        total = 0
        for key in set(keys):
            try:
                total += self._path(key).stat().st_size
            except FileNotFoundError:
                continue
        return total

    def keys_older_than(self, moment: datetime) -> Iterator[str]:
        cutoff = moment.timestamp()
        for path in self.root.glob("??/*"):
            if not path.name.startswith(".tmp-") and path.stat().st_mtime < cutoff:
                yield path.parent.name + path.name

    def delete_many(self, keys: Iterable[str]) -> int:
        deleted = 0
        for key in keys:
            try:
                self._path(key).unlink()
            except FileNotFoundError:
                continue
            deleted += 1
        return deleted

    def stored_between(self, start: datetime | None, end: datetime, limit: int) -> list[Any]:
        # A folder has no index by time: this lists it (the database backend does not).
        low = start.timestamp() if start is not None else float("-inf")
        found = []
        for path in self.root.glob("??/*"):
            if path.name.startswith(".tmp-"):
                continue
            mtime = path.stat().st_mtime
            if low < mtime < end.timestamp():
                found.append((path.parent.name + path.name, mtime))
        found.sort(key=lambda item: item[1])
        return [(key, datetime.fromtimestamp(mtime, tz=end.tzinfo)) for key, mtime in found[:limit]]


@functools.lru_cache(maxsize=8)
def _store_for(dotted_path: str) -> BlobStore:
    return import_string(dotted_path)()


def blob_store() -> BlobStore:
    """The configured store (one instance per configured class)."""
    return _store_for(settings.HARNESS_BLOB_STORE)


def blob_store_deferred(rows: dict[str, Blob], limit: int) -> BlobStore:
    """The configured store; a database store keeps new blobs in `rows` for its caller's
    write (DeferredBlobStore). Other stores write as usual: they commit no transaction."""
    store = blob_store()
    return DeferredBlobStore(store, rows, limit) if isinstance(store, DatabaseBlobStore) else store
