"""The configured store: `blob_store` (by dotted path in `settings.HARNESS_BLOB_STORE`) and
`blob_store_deferred`."""

from __future__ import annotations

import functools

from django.conf import settings
from django.utils.module_loading import import_string

from checkpoints.blobstore.base import BlobStore
from checkpoints.blobstore.database import DatabaseBlobStore, DeferredBlobStore
from checkpoints.models import Blob


@functools.lru_cache(maxsize=8)
def _store_for(dotted_path: str) -> BlobStore:
    store: BlobStore = import_string(dotted_path)()
    return store


def blob_store() -> BlobStore:
    """The configured store (one instance per configured class)."""
    return _store_for(settings.HARNESS_BLOB_STORE)


def blob_store_deferred(rows: dict[str, Blob], limit: int) -> BlobStore:
    """The configured store; a database store keeps new blobs in `rows` for its caller's
    write (DeferredBlobStore). Other stores write as usual: they commit no transaction."""
    store = blob_store()
    return DeferredBlobStore(store, rows, limit) if isinstance(store, DatabaseBlobStore) else store
