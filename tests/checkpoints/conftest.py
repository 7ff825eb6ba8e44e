"""Fixtures for snapshot and recovery tests: isolated workspaces, blob folder and ledger; a
harness.yaml without review rules (so scripted writes run straight through); helpers to create
tasks and run the loop in-process."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.factories import run_in_process, scripted_spec, spec_task

NO_REVIEW_CONFIG = """\
checkpoint_triggers:
  - {event: task_start,             level: task}
  - {event: after_model,            level: step}
  - {event: before_write_operation, level: tool}
  - {event: before_external_call,   level: tool}
  - {event: before_review,          level: tool}
  - {event: after_step,             level: step}
review_rules: []
"""


@pytest.fixture(autouse=True)
def _isolated(settings, harness_dirs: Path, harness_yaml, monkeypatch) -> None:
    settings.HARNESS_BLOB_DIR = harness_dirs / "blobs"
    settings.HARNESS_HEARTBEAT_S = 0.05
    path = harness_yaml(NO_REVIEW_CONFIG)
    # Worker subprocesses (the `workers` fixture) read the same file and blob folder.
    monkeypatch.setenv("HARNESS_CONFIG", str(path))
    monkeypatch.setenv("HARNESS_BLOB_DIR", str(harness_dirs / "blobs"))
    monkeypatch.setenv("HARNESS_HEARTBEAT_S", "0.2")


def spec_dict(*turns: dict, tools: list[str], **extra: Any) -> dict:
    return scripted_spec(turns, tools, **extra)


APP_CONF_SCRIPT = (
    {"call": "write_file", "args": {"path": "app.conf", "content": "version = 1\n"}},
    {"call": "write_file", "args": {"path": "new.txt", "content": "created after v1\n"}},
    {"call": "write_file", "args": {"path": "app.conf", "content": "version = 2\n"}},
    {"call": "write_file", "args": {"path": "app.conf", "content": "version = 3\n"}},
    {"final": "configured"},
)


@pytest.fixture
def app_conf_spec() -> dict:
    """Writes app.conf as v1, creates new.txt, then app.conf v2 and v3."""
    return spec_dict(*APP_CONF_SCRIPT, tools=["write_file", "read_file"])


@pytest.fixture
def finished(operator, app_conf_spec):
    """The app.conf task, run to success by the operator: app.conf is v3 and new.txt exists."""
    task = spec_task(app_conf_spec, user=operator)
    assert run_in_process(task) == "succeeded"
    assert files_of(task.workspace_path) == {
        "app.conf": b"version = 3\n",
        "new.txt": b"created after v1\n",
    }
    return task


@pytest.fixture
def make_task(db) -> Callable[..., Any]:
    """make_task(spec, user=) -> a pending task (tests.factories.spec_task)."""
    return spec_task


@pytest.fixture
def run_inline(db) -> Callable[..., str]:
    """Queue (if needed) and run the task in this process, as a worker would."""
    return run_in_process


def checkpoint_after_step(task, step_index: int):
    """The `after_step` checkpoint that ends step `step_index - 1` (its state's step_index)."""
    from checkpoints.models import Checkpoint

    return Checkpoint.objects.get(
        task=task, trigger="after_step", step_index=step_index, superseded=False
    )


def files_of(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def mode_of(path: Path) -> int:
    return os.stat(path).st_mode & 0o7777
