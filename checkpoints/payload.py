"""Checkpoint payloads: how a checkpoint's canonical bytes are stored and read back.

A checkpoint's payload is its canonical JSON, zlib-compressed, in one of two forms:

- plain: `zlib.compress(raw)` (every checkpoint before payload bases, and those written
  without a `CheckpointCodec`: recovery forks, the SDK runners);
- against a base: `b"B" + <the base's sha256, 32 bytes> + deflate(raw, zdict=base)`, where the base
  is the canonical JSON of an earlier checkpoint of the same run, stored once as a
  content-addressed blob (`checkpoints.blobstore`). Consecutive checkpoints of a run differ by
  a message or two, so one compressed against a recent one stores a few hundred bytes instead
  of the whole state (`CheckpointCodec` picks and rotates the base).

A checkpoint whose canonical bytes are those of one staged before it in the same durable write
(a step's `after_model` and `before_write_operation`: nothing changed between them) stores
`b"S" + <that checkpoint's id, 16 bytes>` instead (`checkpoint_same_as`); retention keeps that
checkpoint while this one stays.

All decode with `checkpoint_decode`, which verifies the sha256 of the uncompressed bytes
either way: a wrong or damaged base cannot produce a checkpoint that passes. A base the blob
store cannot produce makes the checkpoint corrupted (the loaders then fall back to an older
one). Retention counts the bases as it counts snapshot roots (`checkpoints.retention`).
"""

from __future__ import annotations

import uuid
import zlib

from checkpoints.blobstore import blob_key, blob_store
from checkpoints.lru import BoundedCache

# The first byte of a payload compressed against a base (a zlib stream starts with 0x78), and
# of one that is another checkpoint's.
BASE_MARK = b"B"
_BASE_END = 1 + 32
SAME_MARK = b"S"
_SAME_END = 1 + 16
# A run starts a new base when a checkpoint compressed against the current one exceeds this
# share of its uncompressed size (the state has drifted from it: its window of messages moved).
REBASE_SHARE = 1 / 16
BASE_CACHE_LIMIT = 32
_bases: BoundedCache[str, bytes] = BoundedCache(BASE_CACHE_LIMIT)


def _deflate(raw: bytes, key: str, base: bytes) -> bytes:
    compressor = zlib.compressobj(1, zdict=base)
    return BASE_MARK + bytes.fromhex(key) + compressor.compress(raw) + compressor.flush()


class CheckpointCodec:
    """Compresses one run's checkpoints against a base: the canonical bytes of one of its
    earlier checkpoints, rotated when the state has drifted from it (REBASE_SHARE). A new
    base is a blob to store with the write of the checkpoints that use it (`take_bases`); a
    write that fails `forget`s it, so the next checkpoint starts a base of its own."""

    def __init__(self) -> None:
        self.base: tuple[str, bytes] | None = None
        self.unstored: dict[str, bytes] = {}

    def encode(self, raw: bytes) -> bytes:
        if self.base is not None:
            payload = _deflate(raw, *self.base)
            if len(payload) - _BASE_END <= len(raw) * REBASE_SHARE:
                return payload
        key = blob_key(raw)
        self.base = (key, raw)
        self.unstored[key] = raw
        _bases.put(key, raw)
        return _deflate(raw, key, raw)

    def take_bases(self) -> dict[str, bytes]:
        """{key: content} of the bases not stored yet; the caller stores them with the
        checkpoints that name them."""
        bases, self.unstored = self.unstored, {}
        return bases

    def forget(self) -> None:
        self.base = None
        self.unstored = {}


def checkpoint_base_key(payload: bytes | memoryview) -> str | None:
    """The blob key of the base a payload was compressed against (None: plain zlib)."""
    head = bytes(payload[:_BASE_END])
    if head[:1] != BASE_MARK or len(head) != _BASE_END:
        return None
    return head[1:].hex()


def checkpoint_same_as(payload: bytes | memoryview) -> uuid.UUID | None:
    """The id of the checkpoint whose payload this one's stands for (None: its own)."""
    head = bytes(payload[:_SAME_END])
    if head[:1] != SAME_MARK or len(head) != _SAME_END:
        return None
    return uuid.UUID(bytes=head[1:])


def _base_bytes(key: str) -> bytes:
    cached = _bases.get(key)
    if cached is not None:
        return cached
    raw = blob_store().get(key)  # verified against its key
    _bases.put(key, raw)
    return raw


def checkpoint_raw(payload: bytes | memoryview) -> bytes:
    """The canonical bytes of a payload (either form); raises zlib.error, BlobMissing,
    BlobCorrupted or ValueError when they cannot be produced."""
    data = bytes(payload)
    key = checkpoint_base_key(data)
    if key is None:
        return zlib.decompress(data)
    decompressor = zlib.decompressobj(zdict=_base_bytes(key))
    raw = decompressor.decompress(data[_BASE_END:]) + decompressor.flush()
    if not decompressor.eof:
        raise zlib.error("truncated payload")
    return raw
