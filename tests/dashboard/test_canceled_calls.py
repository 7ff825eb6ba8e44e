"""A tool call stopped because an operator canceled its task (`failed`, error class
`canceled`) is the operator's decision, not the tool's failure: no statistic counts it as a
failure — the failure rates per tool, step and MCP server, the heatmap, the retries, the
durations, the overview's chart, the CSV, the roll-ups, clean successes and standing rules'
track records. (Cancelling one command made `run_command` "100 % failed" on the overview.)"""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from dashboard import stats
from dashboard.windows import window_parse
from review.models import ReviewRule
from review.selectors import standing_rules
from tasks.models import RolledHour, Task
from tasks.rollups import rollups_advance
from tasks.services import task_transition
from tests.factories import ReviewRequestFactory, TaskFactory, ToolCallFactory

pytestmark = pytest.mark.django_db


def canceled_call(task: Task, tool: str = "run_command", **fields) -> None:
    ToolCallFactory(
        task=task,
        tool=tool,
        status="failed",
        error_class="canceled",
        error_message="command stopped: task canceled",
        attempts=1,
        duration_ms=4000,
        step_index=0,
        **fields,
    )


@pytest.fixture
def canceled():
    """One run_command that succeeded and one an operator's cancel stopped (and an MCP tool's
    call stopped the same way)."""
    task = TaskFactory()
    ToolCallFactory(
        task=task, tool="run_command", status="succeeded", attempts=1, duration_ms=10, step_index=0
    )
    canceled_call(task)
    canceled_call(task, tool="notes__append")
    return task


def window():
    return window_parse(since="24h", bucket=None, now=timezone.now())


def test_failure_rate_per_tool_and_mcp_server_leave_a_canceled_call_out(canceled):
    by_tool = stats.failure_rate_by_tool(window())
    assert by_tool == [{"tool": "run_command", "calls": 1, "failed": 0, "rate": 0.0}]
    assert stats.failure_rate_by_mcp_server(by_tool) == []


def test_failure_rate_per_step_leaves_a_canceled_call_out(canceled):
    assert stats.failure_rate_by_step(window()) == [
        {"step_index": 0, "calls": 1, "failed": 0, "rate": 0.0}
    ]


def test_heatmap_retries_and_durations_leave_a_canceled_call_out(canceled):
    assert stats.error_heatmap(window()) == []
    assert stats.retry_distribution(window()) == [
        {"retries": 0, "calls": 1, "succeeded": 1, "success_rate": 1.0}
    ]
    assert [(d["tool"], d["calls"], d["p95_ms"]) for d in stats.duration_percentiles(window())] == [
        ("run_command", 1, 10.0)
    ]


def test_rolled_up_hours_leave_a_canceled_call_out(canceled):
    """The sweep's roll-ups: whole hours read from them agree with the raw rows."""
    now = timezone.now()
    Task.objects.filter(id=canceled.id).update(created_at=now - timedelta(hours=5))
    canceled.tool_calls.update(created_at=now - timedelta(hours=5))
    while rollups_advance(now=now):
        pass
    assert RolledHour.objects.exists()
    data = stats.failure_statistics(window())
    assert data["by_tool"] == [{"tool": "run_command", "calls": 1, "failed": 0, "rate": 0.0}]
    assert data["by_step"] == [{"step_index": 0, "calls": 1, "failed": 0, "rate": 0.0}]
    assert data["heatmap"] == []
    assert [r["calls"] for r in data["retries"]] == [1]
    assert [(d["tool"], d["calls"]) for d in data["durations"]] == [("run_command", 1)]


def test_the_overview_chart_does_not_show_a_canceled_command_as_failed(canceled, as_user, viewer):
    page = as_user(viewer).get("/").content.decode()
    figure = json.loads(
        re.search(r'id="chart-failure-rate-data"[^>]*>(.*?)</script>', page, re.S).group(1)
    )
    (trace,) = figure["data"]
    assert trace["name"] == "run_command" and trace["y"] == [0.0]


def test_the_csv_export_does_not_count_a_canceled_call_as_failed(canceled, as_user, viewer):
    response = as_user(viewer).get("/stats/failures/by_tool.csv?since=24h")
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[1:] == [["run_command", "1", "0", "0.0"]]


def test_a_success_after_a_canceled_and_retried_command_is_a_clean_one():
    task = TaskFactory()
    canceled_call(task)
    ToolCallFactory(task=task, tool="run_command", status="succeeded", attempts=1)
    task_transition(task_id=task.id, to="queued")
    task_transition(task_id=task.id, to="running")
    task_transition(task_id=task.id, to="succeeded")
    assert not Task.objects.get(id=task.id).calls_failed
    outcomes = stats.task_outcomes(window())
    assert (outcomes["succeeded_clean"], outcomes["succeeded_after_failed_calls"]) == (1, 0)


def test_a_standing_rules_record_does_not_count_a_canceled_call_as_failed():
    rule = ReviewRule.objects.create(
        name="always-ls", kind="standing", tool="run_command", action="allow"
    )
    task = TaskFactory()
    for status, error_class in (("failed", "canceled"), ("failed", "permanent")):
        call = ToolCallFactory(
            task=task, tool="run_command", status=status, error_class=error_class
        )
        ReviewRequestFactory(
            tool_call=call, kind="standing_rule", status="approved", standing_rule=rule
        )
    (record,) = standing_rules(ids=[rule.id])
    assert (record.allowed, record.failed) == (2, 1)
