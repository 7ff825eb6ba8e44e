"""Fixtures for snapshot and recovery tests: isolated workspaces, blob folder and ledger; a
harness.yaml without review rules (so scripted writes run straight through); helpers to create
tasks and run the loop in-process."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness_site import config

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
def _isolated(settings, tmp_path: Path, monkeypatch) -> Iterator[None]:
    settings.HARNESS_WORKSPACE_ROOT = tmp_path / "ws"
    settings.HARNESS_LEDGER_DIR = tmp_path / "ledger"
    settings.HARNESS_BLOB_DIR = tmp_path / "blobs"
    settings.HARNESS_ENABLE_TEST_TOOLS = True
    settings.HARNESS_HEARTBEAT_S = 0.05
    path = tmp_path / "harness.yaml"
    path.write_text(NO_REVIEW_CONFIG)
    settings.HARNESS_CONFIG_FILE = path
    # Worker subprocesses (the `workers` fixture) read the same file and blob folder.
    monkeypatch.setenv("HARNESS_CONFIG", str(path))
    monkeypatch.setenv("HARNESS_BLOB_DIR", str(tmp_path / "blobs"))
    monkeypatch.setenv("HARNESS_HEARTBEAT_S", "0.2")
    config.harness_config.cache_clear()
    yield
    config.harness_config.cache_clear()


def spec_dict(*turns: dict, tools: list[str], **extra: Any) -> dict:
    return {
        "title": "t",
        "goal": "g",
        "model": {"kind": "scripted", "script": list(turns)},
        "tools": tools,
        **extra,
    }


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
def make_task(db) -> Callable[..., Any]:
    from tasks.services import task_create
    from tasks.spec import TaskSpec

    def make(spec: dict, user=None):
        return task_create(spec=TaskSpec.model_validate(spec), user=user, enqueue=False)

    return make


@pytest.fixture
def run_inline(db) -> Callable[..., str]:
    """Queue (if needed) and run the task in this process, as a worker would."""
    from agent.runtime import task_run
    from tasks.models import Task
    from tasks.services import task_transition

    def run(task) -> str:
        if Task.objects.get(id=task.id).status != "queued":
            task_transition(task_id=task.id, to="queued")
        outcome = task_run(task_id=task.id)
        task.refresh_from_db()
        return outcome

    return run


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
