"""Content-addressed blob stores for workspace snapshots (DESIGN §4).

The backend is chosen by dotted path in `settings.HARNESS_BLOB_STORE`:

- `checkpoints.blobstore.DatabaseBlobStore` (default) keeps blobs in the `Blob` table, so any
  worker on any machine that reaches the database can materialise a workspace;
- `checkpoints.blobstore.FilesystemBlobStore` keeps them as files under
  `settings.HARNESS_BLOB_DIR` (a shared volume when workers run on several machines).

The contract every backend honours is in `base` (tests/checkpoints/test_blobstore.py runs one
contract test against each backend).

The modules, from the bottom: `base` (BlobStore, the contract; BlobMissing, BlobCorrupted,
blob_key, batched), the backends `database` (DatabaseBlobStore, DeferredBlobStore) and
`filesystem` (FilesystemBlobStore), and `configured` (blob_store, blob_store_deferred). Callers
import from this package (settings name the backends `checkpoints.blobstore.<Class>`).
"""

from __future__ import annotations

from checkpoints.blobstore.base import (
    BATCH,
    COMPRESS_LEVEL,
    BlobCorrupted,
    BlobMissing,
    BlobStore,
    batched,
    blob_key,
)
from checkpoints.blobstore.configured import blob_store, blob_store_deferred
from checkpoints.blobstore.database import DatabaseBlobStore, DeferredBlobStore
from checkpoints.blobstore.filesystem import FilesystemBlobStore

__all__ = [
    "BATCH",
    "COMPRESS_LEVEL",
    "BlobCorrupted",
    "BlobMissing",
    "BlobStore",
    "DatabaseBlobStore",
    "DeferredBlobStore",
    "FilesystemBlobStore",
    "batched",
    "blob_key",
    "blob_store",
    "blob_store_deferred",
]
