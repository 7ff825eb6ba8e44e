"""The base contract of blob stores (BlobStore), its errors and helpers.

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

import hashlib
import zlib
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

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
