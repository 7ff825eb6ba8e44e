"""What a process remembers of each workspace between captures (WorkspaceIndex, one per
workspace and blob store, in memory, never inside the workspace): every directory's listing,
its files' hashes and serialised entries, and the blobs the previous capture referenced."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

INDEX_LIMIT = 64


# A file as the index compares it: (name, size, mtime_ns, inode, mode).
Stat = tuple[str, int, int, int, int]
# A file as the index knows it: (size, mtime_ns, inode, hash, racy, mode, the entry as
# serialised for a segment: its canonical JSON and whether a segment ends after it).
Known = tuple[int, int, int, str, bool, int, tuple[bytes, bool]]


@dataclass
class IndexedDir:
    """What the index knows about one directory (keyed by its relative prefix, "" = root)."""

    # The listing as scanned (scandir order); an identical listing means nothing changed.
    listing: tuple[Stat, ...]
    # name -> (size, mtime_ns, inode, hash, racy, mode, its manifest entry as serialised)
    known: dict[str, Known]
    # The directory's manifest entries, pre-serialised as canonical JSON in runs that end at
    # a content-defined cut: (comma-joined entries, ends at a cut, entry count).
    segments: list[tuple[bytes, bool, int]]
    hashes: frozenset[str]
    files: int
    bytes: int
    racy: bool
    others: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SnapshotBase:
    """The last manifest a capture stored in full (checkpoints.snapshots.capture, `delta`): its
    root, its entries ({path: serialised entry}) and the keys of its root and chunks."""

    root: str
    entries: dict[str, bytes]
    keys: frozenset[str]


@dataclass
class WorkspaceIndex:
    dirs: dict[str, IndexedDir] = field(default_factory=dict)
    # Every blob key the previous capture referenced (already stored by it), and when.
    referenced: set[str] = field(default_factory=set)
    referenced_at: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)
    # What a capture with `delta` lists its changes against (while its blobs are referenced).
    base: SnapshotBase | None = None


_indexes: OrderedDict[tuple[str, str], WorkspaceIndex] = OrderedDict()
registry_lock = threading.Lock()


def index_for(workspace: Path) -> WorkspaceIndex:
    key = (str(workspace.resolve()), settings.HARNESS_BLOB_STORE)
    with registry_lock:
        index = _indexes.get(key)
        if index is None:
            index = _indexes[key] = WorkspaceIndex()
            while len(_indexes) > INDEX_LIMIT:
                _indexes.popitem(last=False)
        else:
            _indexes.move_to_end(key)
        return index
