"""The spec's other sections: workspace files, review overrides, context and checks."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import Field, field_validator

from harness_base.config import Regex
from tasks.json_schema import json_schema_check
from tasks.paths import PathEscapeError, PathTooLong, check_path_bounds, validate_relative_path
from tasks.spec.base import SpecModel


def _check_relative_paths(paths: Iterable[str]) -> None:
    """Workspace-relative paths within the bounds of tasks.paths; raised as ValueError (naming
    the path) so pydantic reports the field."""
    for path in paths:
        try:
            check_path_bounds(path)
            validate_relative_path(path)
        except (PathEscapeError, PathTooLong) as exc:
            raise ValueError(str(exc)) from None


MAX_WORKSPACE_FILES = 1000


class WorkspaceSpec(SpecModel):
    files: dict[str, str] = Field(default_factory=dict)

    @field_validator("files")
    @classmethod
    def _relative_paths(cls, files: dict[str, str]) -> dict[str, str]:
        if len(files) > MAX_WORKSPACE_FILES:
            raise ValueError(f"at most {MAX_WORKSPACE_FILES} files (got {len(files)})")
        _check_relative_paths(files)
        return files


class ReviewOverride(SpecModel):
    # Tools that always pause for review in this task, on top of the configured rules.
    always: list[str] = Field(default_factory=list)


class ContextSpec(SpecModel):
    """Per-task overrides of harness.yaml `context` (see harness_base.config.ContextConfig)."""

    recent_history_window: int | None = Field(default=None, ge=2)
    summary_interval: int | None = Field(default=None, ge=1)
    hard_facts_keep: bool | None = None
    hard_facts_max: int | None = Field(default=None, ge=1, le=10_000)
    summary_max_chars: int | None = Field(default=None, ge=200)
    model_summary: bool | None = None
    system_prompt_max_chars: int | None = Field(default=None, ge=200)
    tool_doc_max_chars: int | None = Field(default=None, ge=50)


class ModelReviewSpec(SpecModel):
    # The fraction of tasks (chosen by task id, so a resumed task decides the same way) whose
    # final answer the model reviews.
    sample_rate: float = Field(default=1.0, ge=0, le=1)
    instructions: str = Field(default="", max_length=5000)


class ChecksSpec(SpecModel):
    """The validation funnel for this task (agent/validation.py). Deep checks on the final
    answer: `files_exist`, `regex`, `json_schema`, `model_review`. Stricter checks on write,
    destructive and external calls: `allowed_paths`, `allowed_hosts`, `max_write_bytes`."""

    files_exist: list[str] = Field(default_factory=list, max_length=200)
    regex: Regex | None = Field(default=None, max_length=2000)
    json_schema: dict[str, Any] | None = None
    model_review: ModelReviewSpec | None = None
    allowed_paths: list[str] | None = Field(default=None, max_length=200)
    allowed_hosts: list[str] | None = Field(default=None, max_length=200)
    max_write_bytes: int | None = Field(default=None, ge=1)
    # Consecutive failing steps before the task fails with `validation_failed`.
    max_retries: int | None = Field(default=None, ge=0, le=100)

    @field_validator("files_exist")
    @classmethod
    def _relative_paths(cls, paths: list[str]) -> list[str]:
        _check_relative_paths(paths)
        return paths

    @field_validator("json_schema")
    @classmethod
    def _schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            json_schema_check(schema=value)
        return value
