"""Surveying a whole workspace (every directory, or only those with files a tool reported
changed) and the manifest of what it found (workspace_manifest)."""

from __future__ import annotations

import posixpath
import time
from collections.abc import Iterable
from pathlib import Path

from checkpoints.blobstore import BlobStore
from checkpoints.snapshots.index import IndexedDir, WorkspaceIndex, index_for
from checkpoints.snapshots.manifest import FileEntry, Manifest
from checkpoints.snapshots.scan import Uploader, patch_dir, scan_dir


def survey(
    root: Path, index: WorkspaceIndex, store: BlobStore | None
) -> tuple[dict[str, IndexedDir], set[str]]:
    """Scan the workspace, reusing the index for every directory whose listing (names, sizes,
    mtimes, inodes, modes) is unchanged; updates the index. -> ({prefix: IndexedDir}, the digests
    of files read now that the store was made to hold — none without a store)."""
    root_str = str(root)
    scan_ns = time.time_ns()
    uploader = Uploader(store, index.referenced)
    dirs: dict[str, IndexedDir] = {}
    stack = [""]
    while stack:
        prefix = stack.pop()
        scanned = scan_dir(root_str, prefix, index.dirs.get(prefix), scan_ns, uploader)
        if scanned is not None:
            dirs[prefix], subdirs = scanned
            stack.extend(subdirs)
    uploader.flush()
    index.dirs = dirs
    return dirs, uploader.stored


def survey_known(
    root: Path, index: WorkspaceIndex, store: BlobStore | None, changed: Iterable[str]
) -> tuple[dict[str, IndexedDir], set[str]]:
    """Like survey, for a workspace whose only changes since the index's last survey are the
    files at `changed` (relative paths a tool reported): only those files (and the racy ones
    of the last survey) are looked at again, in directories the index knows; a directory it
    does not know, or where a reported file is gone, is scanned; every other directory is
    taken from the index."""
    root_str = str(root)
    scan_ns = time.time_ns()
    uploader = Uploader(store, index.referenced)
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
            patched = patch_dir(root_str, prefix, previous, by_prefix[prefix], scan_ns, uploader)
            if patched is not None:
                dirs[prefix] = patched
                continue
        scanned = scan_dir(root_str, prefix, previous, scan_ns, uploader)
        if scanned is None:
            for gone in [p for p in dirs if p.startswith(prefix)]:
                del dirs[gone]
        else:
            dirs[prefix] = scanned[0]
    uploader.flush()
    index.dirs = dirs
    return dirs, uploader.stored


def empty_folders(dirs: dict[str, IndexedDir]) -> set[str]:
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


def manifest_of(dirs: dict[str, IndexedDir]) -> Manifest:
    manifest = Manifest(
        (prefix + name, FileEntry(k[3], k[0], mode))
        for prefix, d in dirs.items()
        for name, _s, _m, _i, mode in d.listing
        if (k := d.known.get(name)) is not None
    )
    manifest.folders = frozenset(prefix[:-1] for prefix in empty_folders(dirs))
    return manifest


def workspace_manifest(workspace: Path) -> Manifest:
    """The workspace as it is on disk now (reads only files changed since the last scan)."""
    root = Path(workspace)
    index = index_for(root)
    with index.lock:
        dirs, _ = survey(root, index, None)
    return manifest_of(dirs)
