"""Workspace snapshots (DESIGN §4): capture, load, restore, materialise.

A snapshot is a manifest {relative path -> (content hash, size, mode)} plus the file bodies as
content-addressed, compressed blobs in the configured blob store (`checkpoints.blobstore`),
stored once across checkpoints and tasks.

The manifest itself is stored as blobs too, so a checkpoint carries only a small reference
(`{"v", "root", "files", "bytes"}`, inside its checksum): the sorted entries are cut into
chunks at content-defined boundaries (after a path whose crc32 is 0 mod CHUNK_TARGET), each
chunk is a blob, and a root blob lists the chunk hashes. Changing one file re-stores one chunk
and the root (~2 KB), not the whole manifest, and unchanged workspaces share every blob. The
root hash covers the chunks, which cover the files, and blobs are verified on read, so the
checkpoint checksum protects the whole tree.

Capture is incremental: a per-process index (in memory, keyed by workspace and blob store —
never inside the workspace, so it is never captured) remembers each file's size, mtime, inode
and hash. A file whose stat is unchanged reuses its hash without being read. As in git's
"racy clean" rule, a file modified within RACY_NS of the scan that hashed it is re-hashed next
time, because a same-size rewrite inside one timestamp tick would otherwise go unnoticed.
Only blobs that are new since the previous capture are checked against the store (one batched
existence query), and only those missing are uploaded. When the caller knows which files
changed (the built-in file tools report them), only those files are looked at again (one
lstat each, with the racy ones), not the workspace nor their whole directories.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import posixpath
import tempfile
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings

from checkpoints.blobstore import BlobStore, batched, blob_key, blob_store, blob_store_deferred
from checkpoints.models import Blob
from tasks import beacon
from tasks.canonical import canonical_bytes
from tasks.paths import (
    PathEscapeError,
    file_chmod,
    file_delete,
    file_write_in_place,
    workspace_dir,
)

SNAPSHOT_VERSION = 1
CHUNK_TARGET = 32
CHUNK_MAX = 256
RACY_NS = 50_000_000
# Bytes of file content read before a batch is uploaded (bounds memory on a cold capture).
UPLOAD_BATCH_BYTES = 32 * 1024 * 1024
INDEX_LIMIT = 64
TRUST_STORED_S = 600
# Compressed bytes of new blobs a capture may leave to its caller's write (`defer`).
DEFER_BLOB_BYTES = 4 * 1024 * 1024
MANIFEST_CACHE_LIMIT = 16


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


# A file as the index compares it: (name, size, mtime_ns, inode, mode).
_Stat = tuple[str, int, int, int, int]
# A manifest entry in canonical order: (relative path, hash, size, mode).
_Entry = tuple[str, str, int, int]
# A file as the index knows it: (size, mtime_ns, inode, hash, racy, mode, the entry as
# serialised for a segment: its canonical JSON and whether a segment ends after it).
_Known = tuple[int, int, int, str, bool, int, tuple[bytes, bool]]


@dataclass
class _Dir:
    """What the index knows about one directory (keyed by its relative prefix, "" = root)."""

    # The listing as scanned (scandir order); an identical listing means nothing changed.
    listing: tuple[_Stat, ...]
    # name -> (size, mtime_ns, inode, hash, racy, mode, its manifest entry as serialised)
    known: dict[str, _Known]
    # The directory's manifest entries, pre-serialised as canonical JSON in runs that end at
    # a content-defined cut: (comma-joined entries, ends at a cut, entry count).
    segments: list[tuple[bytes, bool, int]]
    hashes: frozenset[str]
    files: int
    bytes: int
    racy: bool
    others: list[str] = field(default_factory=list)


@dataclass
class _Index:
    dirs: dict[str, _Dir] = field(default_factory=dict)
    # Every blob key the previous capture referenced (already stored by it), and when.
    referenced: set[str] = field(default_factory=set)
    referenced_at: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)


_indexes: OrderedDict[tuple[str, str], _Index] = OrderedDict()
_manifests: OrderedDict[str, Manifest] = OrderedDict()
_registry_lock = threading.Lock()


def _index_for(workspace: Path) -> _Index:
    key = (str(workspace.resolve()), settings.HARNESS_BLOB_STORE)
    with _registry_lock:
        index = _indexes.get(key)
        if index is None:
            index = _indexes[key] = _Index()
            while len(_indexes) > INDEX_LIMIT:
                _indexes.popitem(last=False)
        else:
            _indexes.move_to_end(key)
        return index


# --- scanning ---------------------------------------------------------------------------------


def _walk(root: Path) -> Iterator[str]:
    """Relative paths of everything under root that is not a directory; symlinks are never
    followed."""
    stack = [("", str(root))]
    while stack:
        prefix, directory = stack.pop()
        try:
            it = os.scandir(directory)
        except (FileNotFoundError, NotADirectoryError):
            continue
        with it:
            for entry in it:
                if entry.is_dir(follow_symlinks=False):
                    stack.append((prefix + entry.name + "/", entry.path))
                else:
                    yield prefix + entry.name


class _Uploader:
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


def _rebuild_dir(
    root: str,
    prefix: str,
    listing: tuple[_Stat, ...],
    others: list[str],
    previous: _Dir | None,
    scan_ns: int,
    uploader: _Uploader,
) -> _Dir:
    """Entries for a directory whose listing changed: files whose size, mtime and inode are
    unchanged (and were not racy) keep their hash; the others are read and hashed."""
    before = previous.known if previous is not None else {}
    known: dict[str, _Known] = {}
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
                old[6] if old[5] == mode else _serialise((prefix + name, digest, size, mode))
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
            serialised = _serialise((prefix + name, digest, size, mode))
        racy_dir |= racy
        known[name] = (size, mtime_ns, ino, digest, racy, mode, serialised)
    return _Dir(
        listing=listing,
        known=known,
        segments=_segments([k[6] for k in known.values()]),
        hashes=frozenset(k[3] for k in known.values()),
        files=len(known),
        bytes=sum(k[0] for k in known.values()),
        racy=racy_dir,
        others=others,
    )


def _serialise(entry: _Entry) -> tuple[bytes, bool]:
    """A manifest entry's canonical JSON, and whether a segment ends after it (its path's
    crc32 is 0 mod CHUNK_TARGET: a content-defined cut)."""
    return canonical_bytes(list(entry)), zlib.crc32(entry[0].encode()) % CHUNK_TARGET == 0


def _segments(entries: list[tuple[bytes, bool]]) -> list[tuple[bytes, bool, int]]:
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


def _scan_dir(
    root_str: str, prefix: str, previous: _Dir | None, scan_ns: int, uploader: _Uploader
) -> tuple[_Dir, list[str]] | None:
    """One directory: its _Dir (reused when its listing is unchanged and was not racy) and
    its subdirectories' prefixes; None if it does not exist (any more)."""
    stats: list[_Stat] = []
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
    return _rebuild_dir(root_str, prefix, listing, others, previous, scan_ns, uploader), subdirs


def _patch_dir(
    root_str: str,
    prefix: str,
    previous: _Dir,
    names: set[str],
    scan_ns: int,
    uploader: _Uploader,
) -> _Dir | None:
    """The directory as `previous` knew it, with only `names` (the files a tool reported
    changed in it) and its racy files looked at again: one lstat each, where a scan lists the
    whole directory. None when that cannot say (a file is gone or no longer a regular file):
    the caller scans the directory instead."""
    names = names | {name for name, known in previous.known.items() if known[4]}
    fresh: list[_Stat] = []
    for name in names:
        try:
            st = os.lstat(os.path.join(root_str, prefix + name))
        except (FileNotFoundError, NotADirectoryError):
            return None
        if st.st_mode & 0o170000 != 0o100000:  # not S_ISREG
            return None
        fresh.append((name, st.st_size, st.st_mtime_ns, st.st_ino, st.st_mode & 0o7777))
    beacon.progress("snapshot")
    listing = tuple(stat for stat in previous.listing if stat[0] not in names) + tuple(fresh)
    return _rebuild_dir(root_str, prefix, listing, previous.others, previous, scan_ns, uploader)


def _survey(root: Path, index: _Index, store: BlobStore | None) -> tuple[dict[str, _Dir], set[str]]:
    """Scan the workspace, reusing the index for every directory whose listing (names, sizes,
    mtimes, inodes, modes) is unchanged; updates the index. -> ({prefix: _Dir}, the digests
    of files read now that the store was made to hold — none without a store)."""
    root_str = str(root)
    scan_ns = time.time_ns()
    uploader = _Uploader(store, index.referenced)
    dirs: dict[str, _Dir] = {}
    stack = [""]
    while stack:
        prefix = stack.pop()
        scanned = _scan_dir(root_str, prefix, index.dirs.get(prefix), scan_ns, uploader)
        if scanned is not None:
            dirs[prefix], subdirs = scanned
            stack.extend(subdirs)
    uploader.flush()
    index.dirs = dirs
    return dirs, uploader.stored


def _survey_known(
    root: Path, index: _Index, store: BlobStore | None, changed: Iterable[str]
) -> tuple[dict[str, _Dir], set[str]]:
    """Like _survey, for a workspace whose only changes since the index's last survey are the
    files at `changed` (relative paths a tool reported): only those files (and the racy ones
    of the last survey) are looked at again, in directories the index knows; a directory it
    does not know, or where a reported file is gone, is scanned; every other directory is
    taken from the index."""
    root_str = str(root)
    scan_ns = time.time_ns()
    uploader = _Uploader(store, index.referenced)
    dirs = dict(index.dirs)
    by_prefix: dict[str, set[str]] = {}
    for path in changed:
        folder, name = posixpath.split(path)
        by_prefix.setdefault(folder + "/" if folder else "", set()).add(name)
    for prefix, known in dirs.items():
        if known.racy:
            by_prefix.setdefault(prefix, set())
    for prefix in sorted(by_prefix):
        previous = dirs.get(prefix)
        if previous is not None:
            patched = _patch_dir(root_str, prefix, previous, by_prefix[prefix], scan_ns, uploader)
            if patched is not None:
                dirs[prefix] = patched
                continue
        scanned = _scan_dir(root_str, prefix, previous, scan_ns, uploader)
        if scanned is None:
            for gone in [p for p in dirs if p.startswith(prefix)]:
                del dirs[gone]
        else:
            dirs[prefix] = scanned[0]
    uploader.flush()
    index.dirs = dirs
    return dirs, uploader.stored


# --- capture ----------------------------------------------------------------------------------


def snapshot_capture(
    *,
    task_id: Any,
    workspace: Path,
    changed: Iterable[str] | None = None,
    defer: dict[str, Blob] | None = None,
) -> dict:
    """Capture the workspace; -> the snapshot reference stored in the checkpoint payload.

    `changed`: the relative paths of every file changed since this process last captured
    this workspace, when the changes are known (the harness's own file tools report them):
    only their directories are scanned, not the whole workspace. None: survey everything.

    `defer`: with blobs in the database, the new ones (up to DEFER_BLOB_BYTES) are not stored
    but added to it as unsaved rows, for the caller to insert in the write of the checkpoint
    that references them (one transaction instead of two). A caller whose write then fails
    calls `snapshot_distrust`."""
    root = Path(workspace)
    store = blob_store() if defer is None else blob_store_deferred(defer, DEFER_BLOB_BYTES)
    index = _index_for(root)
    with index.lock:
        # Retention deletes blobs no checkpoint references any more (after a grace period far
        # longer than this), so "already stored" is trusted only for a while.
        if time.monotonic() - index.referenced_at > TRUST_STORED_S:
            index.referenced = set()
        if changed is not None and index.dirs:
            dirs, stored = _survey_known(root, index, store, changed)
        else:
            dirs, stored = _survey(root, index, store)
        hashes = set().union(*(d.hashes for d in dirs.values()))
        # Hashes the index reused (or a preview / restore computed without uploading) that
        # this process has not seen stored recently.
        unverified = hashes - index.referenced - stored
        if unverified:
            _upload_missing_files(root, dirs, store, unverified)
        chunks: list[str] = []
        new_blobs: dict[str, bytes] = {}
        parts: list[bytes] = []
        count = 0

        def close() -> None:
            body = b"[" + b",".join(parts) + b"]"
            digest = blob_key(body)
            chunks.append(digest)
            if digest not in index.referenced:
                new_blobs[digest] = body

        # Chunks follow the canonical order (directories by prefix, files by name) and end at
        # content-defined cuts, so an edit re-stores only the chunk around it. An empty
        # folder is an entry of its own (its prefix, no hash), where its files would be.
        empty = _empty_folders(dirs)
        for prefix in sorted(dirs):
            segments = dirs[prefix].segments
            if prefix in empty:
                body, cut = _serialise((prefix, "", 0, 0))
                segments = [(body, cut, 1)]
            for body, cut, n in segments:
                parts.append(body)
                count += n
                if cut or count >= CHUNK_MAX:
                    close()
                    parts, count = [], 0
        if parts:
            close()
        root_body = canonical_bytes({"v": SNAPSHOT_VERSION, "chunks": chunks})
        root_hash = blob_key(root_body)
        if root_hash not in index.referenced:
            new_blobs[root_hash] = root_body
        store.put_absent(new_blobs)
        referenced = hashes
        referenced.update(chunks)
        referenced.add(root_hash)
        index.referenced = referenced
        index.referenced_at = time.monotonic()
    return {
        "v": SNAPSHOT_VERSION,
        "root": root_hash,
        "files": sum(d.files for d in dirs.values()),
        "bytes": sum(d.bytes for d in dirs.values()),
    }


def snapshot_distrust(workspace: Path) -> None:
    """Forget which blobs this process believes the store holds for the workspace: blobs a
    capture deferred (`defer`) to a write that failed are not stored after all."""
    index = _index_for(Path(workspace))
    with index.lock:
        index.referenced = set()
        index.referenced_at = 0.0


def _upload_missing_files(
    root: Path, dirs: dict[str, _Dir], store: BlobStore, keys: set[str]
) -> None:
    """Make sure the store holds these file bodies (one existence query per batch of keys),
    reading from the workspace only the ones it lacks."""
    by_hash = {
        k[3]: prefix + name
        for prefix, d in dirs.items()
        for name, k in d.known.items()
        if k[3] in keys
    }
    for key in store.missing(by_hash):
        beacon.progress("snapshot")
        content = (root / by_hash[key]).read_bytes()
        if blob_key(content) == key:
            store.put_many({key: content})


# --- loading ----------------------------------------------------------------------------------


def _remember_manifest(root_hash: str, manifest: Manifest) -> None:
    with _registry_lock:
        _manifests[root_hash] = manifest
        _manifests.move_to_end(root_hash)
        while len(_manifests) > MANIFEST_CACHE_LIMIT:
            _manifests.popitem(last=False)


def snapshot_manifest(snapshot: dict | None) -> Manifest:
    """The manifest a snapshot reference points to (empty for None). Blobs are verified;
    raises BlobMissing / BlobCorrupted when the store cannot produce them."""
    if not snapshot:
        return {}
    root_hash = snapshot["root"]
    with _registry_lock:
        cached = _manifests.get(root_hash)
    if cached is not None:
        return cached
    store = blob_store()
    root = json.loads(store.get(root_hash))
    chunks = store.get_many(root["chunks"])
    manifest = Manifest()
    folders = set()
    for digest in root["chunks"]:
        for rel, h, size, mode in json.loads(chunks[digest]):
            if rel.endswith("/"):
                folders.add(rel[:-1])
            else:
                manifest[rel] = FileEntry(h, size, mode)
    manifest.folders = frozenset(folders)
    _remember_manifest(root_hash, manifest)
    return manifest


def snapshot_blob_keys(snapshot: dict | None) -> set[str]:
    """Every blob a snapshot references: root, chunks and file bodies."""
    if not snapshot:
        return set()
    root = json.loads(blob_store().get(snapshot["root"]))
    return {snapshot["root"], *root["chunks"]} | {
        e.hash for e in snapshot_manifest(snapshot).values()
    }


def _empty_folders(dirs: dict[str, _Dir]) -> set[str]:
    """The prefixes ("a/b/") of surveyed folders holding nothing: no file, no other entry, no
    folder."""
    parents = set()
    for prefix in dirs:
        if prefix:
            parent = prefix[:-1].rpartition("/")[0]
            parents.add(parent + "/" if parent else "")
    return {
        prefix
        for prefix, d in dirs.items()
        if prefix and prefix not in parents and not d.listing and not d.others
    }


def _manifest_of(dirs: dict[str, _Dir]) -> Manifest:
    manifest = Manifest(
        (prefix + name, FileEntry(k[3], k[0], mode))
        for prefix, d in dirs.items()
        for name, _s, _m, _i, mode in d.listing
        if (k := d.known.get(name)) is not None
    )
    manifest.folders = frozenset(prefix[:-1] for prefix in _empty_folders(dirs))
    return manifest


def workspace_manifest(workspace: Path) -> Manifest:
    """The workspace as it is on disk now (reads only files changed since the last scan)."""
    root = Path(workspace)
    index = _index_for(root)
    with index.lock:
        dirs, _ = _survey(root, index, None)
    return _manifest_of(dirs)


# --- restore ----------------------------------------------------------------------------------


@dataclass
class RestoreResult:
    """What a restore writes back, deletes and chmods. snapshot_restore_plan (a preview, a
    rollback's note) and snapshot_restore (the rollback) both take it from _restore_changes,
    so a preview lists exactly what the restore then does."""

    written: list[str]
    # Regular files the snapshot does not have.
    deleted: list[str]
    modes: list[str]
    # Symlinks and other entries that are not regular files (fifos, sockets): removed, never
    # followed; one where the snapshot has a file is replaced by it.
    links: list[str] = field(default_factory=list)
    # Folders holding nothing of the snapshot (its files, and its empty folders): removed once
    # what is in them is, empty ones included.
    folders: list[str] = field(default_factory=list)
    # Empty folders the snapshot has and the workspace lacks: made.
    made: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(
            self.written or self.deleted or self.modes or self.links or self.folders or self.made
        )


def removed_paths(result: RestoreResult) -> list[str]:
    """Everything a restore removes, as one list: files, links, and folders (with a `/`)."""
    return sorted([*result.deleted, *result.links, *(f"{rel}/" for rel in result.folders)])


def manifest_changes(current: Manifest, target: Manifest) -> tuple[list[str], list[str], list[str]]:
    """(paths to write, paths to delete, paths whose mode alone differs) to turn `current`
    into `target`."""
    write = sorted(p for p, e in target.items() if p not in current or current[p].hash != e.hash)
    delete = sorted(p for p in current if p not in target)
    modes = sorted(
        p
        for p, e in target.items()
        if p in current and current[p].hash == e.hash and current[p].mode != e.mode
    )
    return write, delete, modes


def _folders_of(paths: Iterable[str]) -> set[str]:
    """Every folder prefix ("a/", "a/b/") of the paths."""
    folders = set()
    for path in paths:
        parts = path.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            folders.add("/".join(parts[:depth]) + "/")
    return folders


def _restore_changes(root: Path, index: _Index, target: Manifest) -> RestoreResult:
    """What turns the workspace as surveyed now into `target`. Call with index.lock held."""
    dirs, _ = _survey(root, index, None)
    write, delete, modes = manifest_changes(_manifest_of(dirs), target)
    empty = getattr(target, "folders", frozenset())
    kept = _folders_of([*target, *(f"{folder}/" for folder in empty)])
    return RestoreResult(
        written=write,
        deleted=delete,
        modes=modes,
        links=sorted(rel for d in dirs.values() for rel in d.others),
        folders=sorted(prefix[:-1] for prefix in dirs if prefix and prefix not in kept),
        made=sorted(folder for folder in empty if f"{folder}/" not in dirs),
    )


def snapshot_restore_plan(*, workspace: Path, snapshot: dict | None) -> RestoreResult:
    """What snapshot_restore would write, delete and chmod now, computed without changing
    anything (it reads only the files changed since the last survey)."""
    root = Path(workspace)
    index = _index_for(root)
    with index.lock:
        if not root.is_dir():
            target = snapshot_manifest(snapshot)
            return RestoreResult(
                written=sorted(target), deleted=[], modes=[], made=sorted(target.folders)
            )
        return _restore_changes(root, index, snapshot_manifest(snapshot))


def restore_blocked(workspace: Path) -> str:
    """Why files cannot be restored into this directory now ('' when they can): checked
    before a recovery commits, since its files are restored only after the commit."""
    root = Path(workspace)
    if root.is_symlink() or (root.exists() and not root.is_dir()):
        return f"{root.name} is not a directory"
    existing = root
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} is not writable"
    return ""


@contextmanager
def _restore_lock(root: Path) -> Iterator[None]:
    """One restore of a workspace at a time on this machine, across processes: an operator's
    recovery restoring files after its commit and a worker syncing the same workspace on start
    (checkpoints.recovery) do not interleave, so the worker's tools run on the finished tree.
    The lock file lives outside the workspace, so it is never captured."""
    folder = Path(tempfile.gettempdir()) / "harness-restore-locks"
    folder.mkdir(exist_ok=True)
    name = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:32]
    with open(folder / f"{name}.lock", "a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def snapshot_restore(*, workspace: Path, snapshot: dict | None) -> RestoreResult:
    """Make the workspace equal to the snapshot: write back files that differ (bytes and
    mode), delete files the snapshot does not have, leave identical files untouched.

    Slow file I/O: never call it inside a transaction that holds row locks (an operator's
    recovery commits first and restores after; see checkpoints.recovery)."""
    root = Path(workspace)
    root.mkdir(parents=True, exist_ok=True)
    target = snapshot_manifest(snapshot)
    index = _index_for(root)
    with _restore_lock(root), index.lock:
        plan = _restore_changes(root, index, target)
        # Every write, delete and chmod goes through workspace descriptors without following
        # symlinks, and never writes through a hard link (tasks.paths): a command
        # may have planted either since the survey.
        for rel in [*plan.deleted, *plan.links]:
            file_delete(root, rel, any_entry=True)
        # Deepest first: a folder is empty once what is in it is gone. One that is not (it
        # changed since the survey) stays, and is not reported as removed.
        for rel in sorted(plan.folders, key=lambda p: p.count("/"), reverse=True):
            parent, _, name = rel.rpartition("/")
            try:
                with workspace_dir(root, parent or ".") as dir_fd:
                    os.rmdir(name, dir_fd=dir_fd)
            except (OSError, PathEscapeError):
                plan.folders.remove(rel)
        store = blob_store()
        for batch in batched(plan.written, 200):
            beacon.progress("restore")
            bodies = store.get_many({target[rel].hash for rel in batch})
            for rel in batch:
                file_write_in_place(root, rel, bodies[target[rel].hash], mode=target[rel].mode)
        for rel in plan.modes:
            file_chmod(root, rel, target[rel].mode)
        for rel in plan.made:
            with workspace_dir(root, rel, create=True):
                pass
    return plan


def snapshot_materialise_if_missing(
    *, workspace: Path, manifest: dict | None, sync: bool = False
) -> bool:
    """Rebuild the workspace from a snapshot when it holds no files here (another machine, a
    wiped disk); with `sync` (after an operator's recovery), also bring an existing workspace
    in line with it. -> True when files were written or deleted."""
    if manifest is None:
        return False
    root = Path(workspace)
    if sync:
        return snapshot_restore(workspace=root, snapshot=manifest).changed
    if not manifest.get("files") or next(_walk(root), None) is not None:
        return False
    snapshot_restore(workspace=root, snapshot=manifest)
    return True
