"""What the file tools take: their argument models (paths within the bounds a task spec's paths
have) and `place`, the directory a path names (the workspace, or the group's shared directory
for `/shared/<path>`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from tasks.paths import PathTooLong, check_path_bounds, shared_relative
from tasks.tools.registry import PermanentToolError, ToolContext

MAX_READ_BYTES = 256 * 1024
MAX_WRITE_BYTES = 10 * 1024 * 1024


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _bounded(path: str) -> str:
    try:
        check_path_bounds(path)
    except PathTooLong as exc:
        raise ValueError(str(exc)) from None
    return path


# A path a call names, within the bounds a task spec's paths have (tasks.paths), so an absurd
# name is an invalid argument told to the model, not an OSError inside the tool.
ToolPath = Annotated[str, AfterValidator(_bounded)]


class PathArgs(_Args):
    path: ToolPath = Field(
        description="file path relative to the workspace (or /shared/... in a group's shared "
        "directory)"
    )


class ReadFileArgs(PathArgs):
    max_bytes: int = Field(default=64 * 1024, ge=1, le=MAX_READ_BYTES)


class ListFilesArgs(_Args):
    path: ToolPath = Field(default=".", description="folder relative to the workspace (or /shared)")
    recursive: bool = True
    limit: int = Field(default=500, ge=1, le=10_000)


class SearchTextArgs(_Args):
    pattern: str = Field(min_length=1, max_length=1000, description="a regular expression")
    path: ToolPath = "."
    max_matches: int = Field(default=100, ge=1, le=2000)


class WriteFileArgs(PathArgs):
    content: str = Field(max_length=MAX_WRITE_BYTES)


class AppendFileArgs(PathArgs):
    content: str = Field(max_length=MAX_WRITE_BYTES)


def place(ctx: ToolContext, path: str) -> tuple[Path, str, bool]:
    """(the directory, the path inside it, whether it is the group's shared directory)."""
    inside = shared_relative(path)
    if inside is None:
        return ctx.workspace, path, False
    if ctx.shared is None:
        raise PermanentToolError(
            f"{path}: this task has no shared directory (the group's root task sets "
            "`shared: true`); use a path relative to the workspace"
        )
    return ctx.shared, inside, True
