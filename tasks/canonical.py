"""Canonical JSON: one byte representation per value, so hashes compare across machines."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_bytes(value: Any) -> bytes:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canonical_hash(value: Any) -> str:
    return sha256_hex(canonical_bytes(value))


def nul_free(value: Any) -> Any:
    """`value` with every NUL character (in strings and keys) replaced by U+FFFD: PostgreSQL
    stores none in text or jsonb, and tools and models produce them (binary command output)."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd") if "\x00" in value else value
    if isinstance(value, dict):
        return {nul_free(k): nul_free(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [nul_free(v) for v in value]
    return value
