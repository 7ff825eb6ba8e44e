from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tasks.tools import ToolContext, registry


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the workspace that no tool may read or change."""
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.txt").write_text("outside secret\n")
    return path


@pytest.fixture
def ctx(workspace: Path) -> ToolContext:
    return ToolContext(task_id="task-1", call_id="call-1", workspace=workspace, timeout_s=30)


@pytest.fixture
def call(ctx: ToolContext) -> Callable[..., Any]:
    """Run a registered tool the way the harness does: validate the arguments, then call it."""

    def run(name: str, arguments: dict[str, Any], *, context: ToolContext | None = None) -> Any:
        spec = registry.get(name)
        return spec.func(context or ctx, spec.args_model.model_validate(arguments))

    return run


@pytest.fixture
def test_tools(settings, tmp_path: Path) -> Path:
    """Test tools on, with their ledger in a fresh folder; returns the ledger folder."""
    settings.HARNESS_ENABLE_TEST_TOOLS = True
    settings.HARNESS_LEDGER_DIR = tmp_path / "ledger"
    return settings.HARNESS_LEDGER_DIR
