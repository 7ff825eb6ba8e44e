"""Teams plug in their own tools by naming a module in HARNESS_TOOL_MODULES."""

from __future__ import annotations

import json

import pytest

from tasks.models import ToolCall
from tasks.tools import registry
from tests.factories import run_in_process, scripted_task

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _custom_tools(settings, tmp_path, monkeypatch):
    settings.HARNESS_TOOL_MODULES = ["examples.ticket_tools"]
    monkeypatch.setenv("HARNESS_EXAMPLE_TRACKER", str(tmp_path / "tracker.json"))
    settings.HARNESS_WORKSPACE_ROOT = tmp_path / "ws"


def test_registered_tool_declares_its_flags():
    spec = registry.get("open_ticket")
    assert (spec.risk, spec.side_effect, spec.idempotent, spec.timeout_s) == (
        "external",
        True,
        True,
        15,
    )
    assert spec.description.startswith("Open a ticket")
    assert spec.json_schema()["properties"]["severity"]["maximum"] == 4


@pytest.fixture
def no_review_rules(harness_yaml):
    """The plug-in path without the shipped rule that pauses external tools for review."""
    harness_yaml("review_rules: []\n")


def test_a_task_uses_a_custom_tool_end_to_end(no_review_rules, tmp_path):
    task = scripted_task(
        [
            {"call": "ticket_status", "args": {"key": "OPS-9"}},
            {"call": "open_ticket", "args": {"title": "API down", "severity": 1}},
            {"final": "opened"},
        ],
        ["open_ticket", "ticket_status"],
        title="file a ticket",
        goal="report the outage",
    )
    run_in_process(task)
    assert task.status == "succeeded", task.error_message
    lookup, opened = ToolCall.objects.filter(task=task).order_by("id")
    assert lookup.status == "failed" and "no ticket OPS-9" in lookup.error_message
    assert opened.result == {"key": "OPS-1", "created": True}
    tickets = json.loads((tmp_path / "tracker.json").read_text())["tickets"]
    assert tickets[0]["idempotency_key"] == f"{task.id}:{opened.call_id}"
    assert tickets[0]["status"] == "open"
