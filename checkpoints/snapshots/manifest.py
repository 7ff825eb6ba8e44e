"""A snapshot's manifest: the files (FileEntry) and empty folders of a workspace, and the
stored form of its entries, canonical JSON cut into chunks at content-defined boundaries."""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from tasks.canonical import canonical_bytes

SNAPSHOT_VERSION = 1
CHUNK_TARGET = 32
CHUNK_MAX = 256


@dataclass(frozen=True, slots=True)
class FileEntry:
    hash: str
    size: int
    mode: int


class Manifest(dict[str, FileEntry]):
    """{relative path -> FileEntry} of the regular files, and `folders`: the empty folders
    (relative, no trailing slash), which hold no file to keep them and so are listed on their
    own (in the stored manifest as entries `["<folder>/", "", 0, 0]`)."""

    folders: frozenset[str] = frozenset()


# A manifest entry in canonical order: (relative path, hash, size, mode).
Entry = tuple[str, str, int, int]


def entry_serialise(entry: Entry) -> tuple[bytes, bool]:
    """A manifest entry's canonical JSON, and whether a segment ends after it (its path's
    crc32 is 0 mod CHUNK_TARGET: a content-defined cut)."""
    return canonical_bytes(list(entry)), zlib.crc32(entry[0].encode()) % CHUNK_TARGET == 0


def entry_segments(entries: list[tuple[bytes, bool]]) -> list[tuple[bytes, bool, int]]:
    """Cut the (sorted, serialised) entries after every content-defined cut, or every
    CHUNK_MAX entries, and join each run."""
    segments = []
    run: list[bytes] = []
    for body, cut in entries:
        run.append(body)
        if cut or len(run) >= CHUNK_MAX:
            segments.append((b",".join(run), cut, len(run)))
            run = []
    if run:
        segments.append((b",".join(run), False, len(run)))
    return segments
