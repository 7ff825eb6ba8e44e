"""The tree: one folder's listing for the page (`folder_listing`) and the API's list of files
(`files_list`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from checkpoints.files.workspace import PATH_MAX_CHARS, FilesInvalid, WorkspaceAt
from checkpoints.selectors import entry_dict
from tasks.errors import NotFound

# Entries one folder of the tree lists on the page, and files the API lists at once.
FOLDER_SHOWN = 1000
API_LIST_MAX = 5000


@dataclass
class FolderListing:
    """One folder of the tree: its subfolders (with the files and bytes under each) and its
    files, folders first, by name; at most FOLDER_SHOWN entries (`hidden` more)."""

    folder: str
    crumbs: list[tuple[str, str]]
    folders: list[dict[str, Any]] = field(default_factory=list)
    files: list[dict[str, Any]] = field(default_factory=list)
    hidden: int = 0


def folder_check(folder: Any) -> str:
    """A folder parameter: "" (the root) or a path without a trailing slash."""
    if not isinstance(folder, str):
        return ""
    if len(folder) > PATH_MAX_CHARS or "\x00" in folder:
        raise FilesInvalid("dir", f"a folder path of at most {PATH_MAX_CHARS} characters")
    return folder.strip("/")


def folder_crumbs(folder: str) -> list[tuple[str, str]]:
    """(name, folder path) of each folder from the root down to `folder`."""
    parts = folder.split("/") if folder else []
    return [(part, "/".join(parts[: depth + 1])) for depth, part in enumerate(parts)]


def folder_listing(*, at: WorkspaceAt, folder: str) -> FolderListing:
    """The entries of `folder` ("" = the root). NotFound when no file of the manifest is
    under it (the root of an empty workspace is listed, empty)."""
    prefix = f"{folder}/" if folder else ""
    folders: dict[str, dict[str, Any]] = {}
    files: list[dict[str, Any]] = []
    for path, entry in at.manifest.items():
        if not path.startswith(prefix):
            continue
        name, slash, _ = path[len(prefix) :].partition("/")
        if slash:
            sub = folders.setdefault(
                name, {"name": name, "path": prefix + name, "files": 0, "bytes": 0}
            )
            sub["files"] += 1
            sub["bytes"] += entry.size
        else:
            files.append({"name": name, "path": path, "size": entry.size, "mode": entry.mode})
    if folder and not folders and not files:
        raise NotFound(f"no folder {folder!r} at this checkpoint")
    entries = sorted(folders.values(), key=lambda f: f["name"])
    listing = FolderListing(folder=folder, crumbs=folder_crumbs(folder))
    listing.folders = entries[:FOLDER_SHOWN]
    listing.files = sorted(files, key=lambda f: f["name"])[: FOLDER_SHOWN - len(listing.folders)]
    listing.hidden = len(entries) + len(files) - len(listing.folders) - len(listing.files)
    return listing


def files_list(*, at: WorkspaceAt, prefix: str = "") -> tuple[list[dict[str, Any]], bool]:
    """(the files whose path starts with `prefix`, by path, at most API_LIST_MAX; whether
    there were more)."""
    paths = sorted(p for p in at.manifest if p.startswith(prefix))
    rows = [{"path": p, **(entry_dict(at.manifest[p]) or {})} for p in paths[:API_LIST_MAX]]
    return rows, len(paths) > API_LIST_MAX
