"""Blobs as files under `settings.HARNESS_BLOB_DIR`: FilesystemBlobStore."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from django.conf import settings

from checkpoints.blobstore.base import BlobStore


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
