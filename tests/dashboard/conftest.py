"""Fixtures for the dashboard tests: tasks run through the real loop in-process (rows with
hand-chosen fields and timestamps come from tests.factories)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tasks.models import Task
from tests.factories import run_in_process, scripted_task


@pytest.fixture(autouse=True)
def _harness_settings(harness_dirs, quiet_watchdog) -> None:
    pass


@pytest.fixture
def run_task(operator) -> Callable[..., Task]:
    """Create a task as the operator and run it through the real loop in this process."""

    def run(script: list[dict], tools: list[str], **extra: Any) -> Task:
        task = scripted_task(script, tools, user=operator, **extra)
        run_in_process(task)
        return task

    return run
