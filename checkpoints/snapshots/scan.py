"""Scanning one directory of a workspace against the index: a listing unchanged since the last
scan is reused, files whose stat is unchanged keep their hash, the others are read, hashed and
(new since the previous capture) uploaded in bounded batches."""

from __future__ import annotations

import os

from checkpoints.blobstore import BlobStore, blob_key
from checkpoints.snapshots.index import IndexedDir, Known, Stat
from checkpoints.snapshots.manifest import entry_segments, entry_serialise
from tasks import beacon

RACY_NS = 50_000_000
# Bytes of file content read before a batch is uploaded (bounds memory on a cold capture).
UPLOAD_BATCH_BYTES = 32 * 1024 * 1024


class Uploader:
    """Collects file bodies new since the previous capture and uploads the ones the store
    lacks, in bounded batches (one existence query per batch)."""

    def __init__(self, store: BlobStore | None, referenced: set[str]) -> None:
        self.store = store
        self.referenced = referenced
        self.pending: dict[str, bytes] = {}
        self.size = 0
        # Digests this survey made sure the store holds.
        self.stored: set[str] = set()

    def add(self, digest: str, content: bytes) -> None:
        if self.store is None or digest in self.referenced:
            return
        self.pending[digest] = content
        self.size += len(content)
        if self.size >= UPLOAD_BATCH_BYTES:
            self.flush()

    def flush(self) -> None:
        if self.store is not None and self.pending:
            self.store.put_absent(self.pending)
            self.stored.update(self.pending)
        self.pending, self.size = {}, 0


def rebuild_dir(
    root: str,
    prefix: str,
    listing: tuple[Stat, ...],
    others: list[str],
    previous: IndexedDir | None,
    scan_ns: int,
    uploader: Uploader,
) -> IndexedDir:
    """Entries for a directory whose listing changed: files whose size, mtime and inode are
    unchanged (and were not racy) keep their hash; the others are read and hashed."""
    before = previous.known if previous is not None else {}
    known: dict[str, Known] = {}
    racy_dir = False
    for name, size, mtime_ns, ino, mode in sorted(listing):
        old = before.get(name)
        if (
            old is not None
            and not old[4]
            and old[0] == size
            and old[1] == mtime_ns
            and old[2] == ino
        ):
            digest, racy = old[3], False
            # An unchanged file keeps its serialised entry (the directory's other files are
            # what a step that wrote one file rescans).
            serialised = (
                old[6] if old[5] == mode else entry_serialise((prefix + name, digest, size, mode))
            )
        else:
            beacon.progress("snapshot")  # reading and hashing files: moving, however many
            try:
                with open(os.path.join(root, prefix + name), "rb") as fh:
                    content = fh.read()
            except FileNotFoundError:  # removed between scan and read
                continue
            digest, size = blob_key(content), len(content)
            racy = mtime_ns > scan_ns - RACY_NS
            uploader.add(digest, content)
            serialised = entry_serialise((prefix + name, digest, size, mode))
        racy_dir |= racy
        known[name] = (size, mtime_ns, ino, digest, racy, mode, serialised)
    return IndexedDir(
        listing=listing,
        known=known,
        segments=entry_segments([k[6] for k in known.values()]),
        hashes=frozenset(k[3] for k in known.values()),
        files=len(known),
        bytes=sum(k[0] for k in known.values()),
        racy=racy_dir,
        others=others,
    )


def scan_dir(
    root_str: str, prefix: str, previous: IndexedDir | None, scan_ns: int, uploader: Uploader
) -> tuple[IndexedDir, list[str]] | None:
    """One directory: its IndexedDir (reused when its listing is unchanged and was not racy) and
    its subdirectories' prefixes; None if it does not exist (any more)."""
    stats: list[Stat] = []
    others: list[str] = []
    subdirs: list[str] = []
    try:
        it = os.scandir(os.path.join(root_str, prefix) if prefix else root_str)
    except (FileNotFoundError, NotADirectoryError):
        return None
    add = stats.append  # the hot loop: one lstat per file, nothing else
    beacon.progress("snapshot")
    with it:
        for entry in it:
            if entry.is_dir(follow_symlinks=False):
                subdirs.append(prefix + entry.name + "/")
                continue
            st = entry.stat(follow_symlinks=False)
            if st.st_mode & 0o170000 == 0o100000:  # S_ISREG
                add((entry.name, st.st_size, st.st_mtime_ns, st.st_ino, st.st_mode & 0o7777))
            else:
                others.append(prefix + entry.name)
    listing = tuple(stats)
    if previous is not None and not previous.racy and previous.listing == listing:
        previous.others = others
        return previous, subdirs
    return rebuild_dir(root_str, prefix, listing, others, previous, scan_ns, uploader), subdirs


def patch_dir(
    root_str: str,
    prefix: str,
    previous: IndexedDir,
    names: set[str],
    scan_ns: int,
    uploader: Uploader,
) -> IndexedDir | None:
    """The directory as `previous` knew it, with only `names` (every file changed in it since:
    those a tool reported, or a workspace watch saw) and its racy files looked at again: one
    lstat each, where a scan lists the whole directory. A name gone is gone from the listing
    (a file deleted, renamed away, a temporary file written and renamed). None when that
    cannot say (the directory is gone, a name is or was no regular file): the caller scans the
    directory instead."""
    names = names | {name for name, known in previous.known.items() if known[4]}
    if previous.others and {prefix + name for name in names} & set(previous.others):
        return None
    fresh: list[Stat] = []
    for name in names:
        try:
            st = os.lstat(os.path.join(root_str, prefix + name))
        except FileNotFoundError:
            if not os.path.isdir(os.path.join(root_str, prefix) if prefix else root_str):
                return None  # the directory itself is gone
            continue
        except NotADirectoryError:
            return None
        if st.st_mode & 0o170000 != 0o100000:  # not S_ISREG
            return None
        fresh.append((name, st.st_size, st.st_mtime_ns, st.st_ino, st.st_mode & 0o7777))
    beacon.progress("snapshot")
    listing = tuple(stat for stat in previous.listing if stat[0] not in names) + tuple(fresh)
    return rebuild_dir(root_str, prefix, listing, previous.others, previous, scan_ns, uploader)
