"""The blob store contract (checkpoints.blobstore.BlobStore), run against every backend."""

from __future__ import annotations

import zlib
from datetime import timedelta

import pytest
from django.utils import timezone

from checkpoints.blobstore import (
    BlobCorrupted,
    BlobMissing,
    BlobStore,
    DatabaseBlobStore,
    FilesystemBlobStore,
    blob_key,
    blob_store,
)
from checkpoints.models import Blob
from tests.conftest import run_in_threads

BACKENDS = {
    "database": DatabaseBlobStore,
    "filesystem": FilesystemBlobStore,
}


def _corrupt(store: BlobStore, key: str) -> None:
    bad = zlib.compress(b"something else")
    if isinstance(store, DatabaseBlobStore):
        Blob.objects.filter(sha256=key).update(data=bad)
    else:
        store._path(key).write_bytes(bad)


@pytest.fixture(params=sorted(BACKENDS))
def store(request, settings, transactional_db) -> BlobStore:
    settings.HARNESS_BLOB_STORE = f"checkpoints.blobstore.{BACKENDS[request.param].__name__}"
    return blob_store()


def test_every_backend_honours_the_blob_store_contract(store):
    text = b"line of text\n" * 2000
    empty = b""
    binary = bytes(range(256)) * 4
    blobs = {blob_key(c): c for c in (text, empty, binary)}

    assert store.missing(blobs) == set(blobs)
    store.put_many(blobs)
    assert store.missing(blobs) == set()
    assert all(store.has(key) for key in blobs)
    assert store.get_many(blobs) == blobs
    assert store.get(blob_key(text)) == text

    # Stored compressed: repetitive text takes a fraction of its size.
    assert store.stored_size([blob_key(text)]) < len(text) / 10

    # Putting again is a no-op, also from several threads at once.
    errors: list[BaseException] = []

    def put_again() -> None:
        try:
            store.put_many(blobs)
        except BaseException as exc:  # reported below
            errors.append(exc)

    run_in_threads(*[put_again] * 4)
    assert errors == []
    assert store.get_many(blobs) == blobs

    unknown = blob_key(b"never stored")
    assert store.missing([unknown, blob_key(text)]) == {unknown}
    assert not store.has(unknown)
    with pytest.raises(BlobMissing) as missing:
        store.get_many([blob_key(text), unknown])
    assert missing.value.keys == [unknown]

    # Bytes that no longer hash to their key are refused, never returned.
    _corrupt(store, blob_key(binary))
    with pytest.raises(BlobCorrupted):
        store.get(blob_key(binary))

    # Garbage collection: list by age, delete (absent keys are ignored).
    now = timezone.now()
    assert set(store.keys_older_than(now + timedelta(seconds=5))) == set(blobs)
    assert set(store.keys_older_than(now - timedelta(hours=1))) == set()
    assert store.delete_many([blob_key(text), unknown]) == 1
    assert store.missing(blobs) == {blob_key(text)}


def test_the_store_is_chosen_by_dotted_path_in_settings(settings):
    settings.HARNESS_BLOB_STORE = "checkpoints.blobstore.FilesystemBlobStore"
    assert isinstance(blob_store(), FilesystemBlobStore)
    settings.HARNESS_BLOB_STORE = "checkpoints.blobstore.DatabaseBlobStore"
    assert isinstance(blob_store(), DatabaseBlobStore)
