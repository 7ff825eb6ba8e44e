"""Target fingerprints: the state of what a tool call acts on, recorded when its review opens
(`ReviewRequest.target_fingerprint`) and compared when it is decided and just before the
approved call runs (review.recheck). An approval binds the arguments (`arguments_hash`) and,
through this, the targets: the file a diff was computed against, the workspace a command runs
in, the address a request goes to, the MCP tool as its server describes it.

A fingerprint is `{"targets": [...], "hash": sha256 of the canonical targets}`; a target is a
dict with a `kind` and a `key` (what it is, e.g. a path) and its state:

- `file`: `sha256` of the content, None when absent; a folder is `folder` with `tree`;
- `workspace` (run_command): `tree`, the digest of every file under the folder (path, mode,
  content hash; links by their target), and `files`, how many;
- `command`, `http`, `mcp`: what the tool itself records (see its `fingerprint`).

`refused` says the tool will refuse the target (a path through a symlink, a /shared/ path with
no shared directory): a state like any other. `unverified` says the state could not be read;
a recheck never accepts it (fail closed)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tasks.canonical import canonical_hash
from tasks.errors import PermanentToolError
from tasks.paths import PathEscapeError, call_paths, file_open, shared_relative, workspace_dir
from tasks.tools.registry import ToolContext, ToolSpec

READ_CHUNK = 1024 * 1024
# How often a preview is made again when its targets changed while it was being made.
PREVIEW_ATTEMPTS = 3
# Kinds whose state lives on this machine's disk (the workspace, the shared directory): a
# decision re-reads them, so a diff that went stale between page load and click is refused.
# The others (addresses, MCP servers) are re-read by the worker just before the call runs.
LOCAL_KINDS = frozenset({"file", "folder", "workspace"})


def fingerprint_of(targets: list[dict[str, Any]]) -> dict[str, Any]:
    return {"targets": targets, "hash": canonical_hash(targets)}


def _sha256_fd(fd: int) -> str:
    digest = hashlib.sha256()
    with open(fd, "rb", closefd=False) as fh:
        while chunk := fh.read(READ_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _walk(root: Path, folder: str) -> Iterator[tuple[str, os.stat_result]]:
    """(path relative to `folder`, lstat) of every entry under it, sorted; links not followed."""
    base = root if folder in ("", ".") else root / folder
    for current, dirs, names in os.walk(base, followlinks=False):
        dirs.sort()
        for name in sorted(names + [d for d in dirs if os.path.islink(os.path.join(current, d))]):
            full = os.path.join(current, name)
            yield os.path.relpath(full, base), os.lstat(full)


def tree_digest(root: Path, folder: str = ".") -> tuple[str, int]:
    """(digest, file count) of the folder `folder` of `root` (checked like a tool's path): every
    regular file's path, permission bits and content hash, every link's target."""
    with workspace_dir(root, folder):  # refuses a folder reached through a symlink
        pass
    digest = hashlib.sha256()
    count = 0
    for relative, info in _walk(root, folder):
        if stat.S_ISLNK(info.st_mode):
            entry = f"L {relative} {os.readlink(root / folder / relative)}"
        elif stat.S_ISREG(info.st_mode):
            fd = os.open(root / folder / relative, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                entry = f"F {relative} {stat.S_IMODE(info.st_mode):o} {_sha256_fd(fd)}"
            finally:
                os.close(fd)
            count += 1
        else:
            entry = f"O {relative} {stat.S_IFMT(info.st_mode):o}"
        digest.update(entry.encode("utf-8", "surrogateescape") + b"\n")
    return digest.hexdigest(), count


def _place(ctx: ToolContext, path: str) -> tuple[Path | None, str]:
    inside = shared_relative(path)
    if inside is None:
        return ctx.workspace, path
    return ctx.shared, inside


def file_target(ctx: ToolContext, path: str) -> dict[str, Any]:
    """The state of one path a call names: a workspace path, or `/shared/<path>`."""
    target: dict[str, Any] = {"kind": "file", "key": path}
    root, inside = _place(ctx, path)
    if root is None:
        return {**target, "refused": "this task has no shared directory"}
    try:
        fd = file_open(root, inside)
    except FileNotFoundError:
        return {**target, "sha256": None}
    except PathEscapeError as exc:
        return {**target, "refused": str(exc)}
    except PermanentToolError:  # a folder
        tree, files = tree_digest(root, inside)
        return {"kind": "folder", "key": path, "tree": tree, "files": files}
    try:
        return {**target, "sha256": _sha256_fd(fd)}
    finally:
        os.close(fd)


def workspace_target(ctx: ToolContext, *, shared: bool = False) -> dict[str, Any]:
    """The whole workspace (or the group's shared directory) a command runs in."""
    root = ctx.shared if shared else ctx.workspace
    key = "/shared" if shared else "."
    if root is None:
        return {"kind": "workspace", "key": key, "refused": "no shared directory"}
    tree, files = tree_digest(root)
    return {"kind": "workspace", "key": key, "tree": tree, "files": files}


def call_targets(
    *, tool: ToolSpec, ctx: ToolContext, args: Any, arguments: dict[str, Any], local: bool = False
) -> list[dict[str, Any]]:
    """The current state of every target of this call: the tool's own `fingerprint`, else the
    paths its arguments name (the file tools, user tools with path arguments). `local`: only
    the targets on this machine's disk (a decision in the web process). A target that cannot
    be read is `unverified`, never left out."""
    remote = tool.risk == "external" or bool(tool.server)
    if local and remote:
        return []
    try:
        if tool.fingerprint is not None:
            targets = tool.fingerprint(ctx, args)
        elif tool.server:
            targets = []
        else:
            targets = [file_target(ctx, path) for path in call_paths(arguments)]
    except Exception as exc:  # the check could not be made: fail closed
        return [{"kind": "call", "key": tool.name, "unverified": f"{type(exc).__name__}: {exc}"}]
    return [t for t in targets if not local or t["kind"] in LOCAL_KINDS]


def call_preview(*, tool: ToolSpec, ctx: ToolContext, args: Any, arguments: dict[str, Any]) -> str:
    """What the call would do, for a reviewer: the tool's own preview, else its arguments."""
    if tool.preview is None:
        return json.dumps(arguments, indent=2, ensure_ascii=False)
    try:
        return tool.preview(ctx, args)
    except Exception as exc:  # a preview must never block the pause
        return f"(preview unavailable: {exc})"


def previewed(
    *, tool: ToolSpec, ctx: ToolContext, args: Any, arguments: dict[str, Any], local: bool = False
) -> tuple[str, dict[str, Any]]:
    """(the preview, the fingerprint it was computed against): the targets are read before and
    after the preview and must agree, so the diff a reviewer reads is the diff of exactly the
    recorded state. Targets that kept changing are recorded as unverified: an approval of
    them never runs (review.recheck). `local`: only the targets on this machine's disk (a
    decision's edit, previewed in the web process)."""
    before = call_targets(tool=tool, ctx=ctx, args=args, arguments=arguments, local=local)
    for _attempt in range(PREVIEW_ATTEMPTS):
        text = call_preview(tool=tool, ctx=ctx, args=args, arguments=arguments)
        after = call_targets(tool=tool, ctx=ctx, args=args, arguments=arguments, local=local)
        if after == before:
            return text, fingerprint_of(after)
        before = after
    unsteady = {"kind": "call", "key": tool.name, "unverified": "changed while previewed"}
    return text, fingerprint_of([*before, unsteady])


def _describe(target: dict[str, Any]) -> str:
    if target["kind"] in ("workspace",):
        return "the shared directory" if target["key"] == "/shared" else "the workspace"
    return str(target["key"])


def _state(target: dict[str, Any]) -> Any:
    return {k: v for k, v in target.items() if k not in ("kind", "key")}


def fingerprint_changes(
    *, recorded: dict[str, Any], current: list[dict[str, Any]], since: str, partial: bool = False
) -> list[str]:
    """What differs between the recorded fingerprint and the targets as they are now, one
    sentence each ("service.conf changed since you approved"). `partial`: `current` holds only
    some kinds (a decision's local re-read); otherwise a recorded target missing now, or any
    target whose state could not be read, is a change (fail closed)."""
    before = {(t["kind"], t["key"]): t for t in recorded.get("targets") or []}
    now = {(t["kind"], t["key"]): t for t in current}
    changes: list[str] = []
    for key, target in now.items():
        name = _describe(target)
        if "unverified" in target:
            if not partial:
                changes.append(f"could not check {name}: {target['unverified']}")
            continue
        old = before.get(key)
        if old is None:
            if not partial:
                changes.append(f"{name} was not part of the approved state")
            continue
        if "unverified" in old:
            changes.append(f"{name} could not be checked when the review opened")
        elif _state(old) != _state(target):
            changes.append(_change_text(name, old, target, since))
    if not partial:
        changes += [
            f"could not check {_describe(old)}: not found now"
            for key, old in before.items()
            if key not in now
        ]
    return changes


def _change_text(name: str, old: dict[str, Any], new: dict[str, Any], since: str) -> str:
    if "refused" in new:
        return f"{name} changed {since}: the tool would refuse it now ({new['refused']})"
    if old["kind"] == "file":
        if old.get("sha256") is None and new.get("sha256") is not None:
            return f"{name} was created {since}"
        if old.get("sha256") is not None and new.get("sha256") is None:
            return f"{name} was deleted {since}"
    if old["kind"] == "workspace":
        return f"{name} changed {since} ({old.get('files')} -> {new.get('files')} files)"
    fields = [k for k in sorted(set(_state(old)) | set(_state(new))) if old.get(k) != new.get(k)]
    return f"{name} changed {since} ({', '.join(fields)})"
