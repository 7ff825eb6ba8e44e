"""A 20-step recorded task and its case, shared by the replay tests (issue #31)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import scripted_model, task_spec

TOOLS = [
    "write_file",
    "read_file",
    "append_file",
    "list_files",
    "delete_file",
    "ledger_append",
    "stamp",
]
# No rule pauses or denies these (the shipped harness.yaml reviews external and destructive
# tools): the recorded run goes through without a person.
OPEN_POLICY = "review_rules: []\n"


def twenty_steps() -> list[dict[str, Any]]:
    """19 tool steps and a final answer; step 7 writes notes/07.md, step 12 calls stamp, steps 3
    and 10 are external side effects (ledger_append)."""
    w = lambda path, text: {"call": "write_file", "args": {"path": path, "content": text}}  # noqa: E731
    r = lambda path: {"call": "read_file", "args": {"path": path}}  # noqa: E731
    return [
        w("notes/01.md", "one\n"),
        r("notes/01.md"),
        {"call": "ledger_append", "args": {"key": "rec-a", "value": "1"}},
        w("notes/04.md", "four\n"),
        {"call": "list_files", "args": {"path": "notes"}},
        {"call": "append_file", "args": {"path": "notes/01.md", "content": "more\n"}},
        w("notes/07.md", "seven\n"),
        r("notes/07.md"),
        r("seed.md"),
        {"call": "ledger_append", "args": {"key": "rec-b", "value": "2"}},
        w("notes/11.md", "eleven\n"),
        {"call": "stamp", "args": {"name": "release"}},
        r("notes/11.md"),
        {"call": "append_file", "args": {"path": "notes/04.md", "content": "again\n"}},
        w("notes/15.md", "fifteen\n"),
        {"call": "list_files", "args": {"path": "notes"}},
        {"call": "delete_file", "args": {"path": "notes/15.md"}},
        r("notes/04.md"),
        w("notes/final.md", "done\n"),
        {"final": "19 steps done"},
    ]


def waiting_spec() -> dict[str, Any]:
    """A task that writes a.md, then waits for review before writing cfg/app.conf (the shipped
    policy reviews a *.conf write): where the fork tests fork from."""
    return task_spec(
        scripted_model(
            {"call": "write_file", "args": {"path": "a.md", "content": "a\n"}},
            {"call": "write_file", "args": {"path": "cfg/app.conf", "content": "x=1\n"}},
            {"final": "done"},
        ),
        ["write_file"],
    )


def twenty_step_spec(script: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return task_spec(
        scripted_model(*(script or twenty_steps())),
        TOOLS,
        title="twenty steps",
        workspace={"files": {"seed.md": "hello\n"}},
    )


@pytest.fixture
def stamp_tools(settings) -> None:
    settings.HARNESS_TOOL_MODULES = ["tests.cases.stamp_tools"]
