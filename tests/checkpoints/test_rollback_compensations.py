"""The rollback preview tells the truth in three lists (issue #44): the files restored, the
calls a rollback compensates (each with the exact compensating call and whether it will pause
for review) and the calls it cannot undo (declared irreversible, or with no compensation)."""

from __future__ import annotations

import json

import pytest

from checkpoints.selectors import rollback_preview
from tasks.models import ToolCall
from tests.checkpoints.conftest import NO_REVIEW_CONFIG, checkpoint_after_step, spec_dict
from tests.factories import ReviewRequestFactory

pytestmark = pytest.mark.django_db(transaction=True)

ALLOW_COMMANDS = NO_REVIEW_CONFIG.replace(
    "review_rules: []",
    "review_rules:\n  - {name: commands-ok, tool: run_command, action: allow}",
)


@pytest.fixture(autouse=True)
def _tickets(settings, tmp_path, monkeypatch):
    settings.HARNESS_TOOL_MODULES = ["examples.ticket_tools"]
    monkeypatch.setenv("HARNESS_EXAMPLE_TRACKER", str(tmp_path / "tracker.json"))


def tracker(tmp_path) -> dict:
    return json.loads((tmp_path / "tracker.json").read_text())


@pytest.fixture
def two_tickets(operator, make_task, run_inline, tmp_path):
    """Wrote notes.txt, opened OPS-1 and OPS-2, then rewrote notes.txt."""
    task = make_task(
        spec_dict(
            {"call": "write_file", "args": {"path": "notes.txt", "content": "v1\n"}},
            {"call": "open_ticket", "args": {"title": "API down", "severity": 1}},
            {"call": "open_ticket", "args": {"title": "DB slow", "severity": 2}},
            {"call": "write_file", "args": {"path": "notes.txt", "content": "v2\n"}},
            {"final": "filed"},
            tools=["write_file", "open_ticket", "close_ticket"],
        ),
        user=operator,
    )
    assert run_inline(task) == "succeeded", task.error_message
    assert [t["key"] for t in tracker(tmp_path)["tickets"]] == ["OPS-1", "OPS-2"]
    return task


def test_preview_compensates_both_tickets_newest_first_and_restores_the_file(two_tickets, tmp_path):
    task = two_tickets
    opened = list(ToolCall.objects.filter(task=task, tool="open_ticket").order_by("id"))
    preview = rollback_preview(task=task, checkpoint=checkpoint_after_step(task, 1))
    assert preview.allowed
    assert preview.files_restore == ["notes.txt"]
    assert [(c["tool"], c["arguments"], c["call_id"]) for c in preview.compensations] == [
        ("close_ticket", {"key": "OPS-2"}, opened[1].call_id),
        ("close_ticket", {"key": "OPS-1"}, opened[0].call_id),
    ]
    assert [c["review"] for c in preview.compensations] == [False, False]
    assert preview.irreversible == []
    # A preview changes nothing, in the workspace or in the world.
    assert (task.workspace_path / "notes.txt").read_text() == "v2\n"
    assert {t["status"] for t in tracker(tmp_path)["tickets"]} == {"open"}


def test_a_compensation_a_rule_reviews_is_shown_pausing(two_tickets, harness_yaml):
    harness_yaml(
        NO_REVIEW_CONFIG.replace(
            "review_rules: []",
            "review_rules:\n  - {name: closing, tool: close_ticket, action: review}",
        )
    )
    preview = rollback_preview(task=two_tickets, checkpoint=checkpoint_after_step(two_tickets, 1))
    assert [c["review"] for c in preview.compensations] == [True, True]


def test_the_compensation_of_a_reviewed_call_is_reviewed_unless_a_rule_allows_it(
    two_tickets, harness_yaml
):
    first = ToolCall.objects.filter(task=two_tickets, tool="open_ticket").order_by("id")[0]
    ReviewRequestFactory(tool_call=first, status="approved")
    checkpoint = checkpoint_after_step(two_tickets, 1)
    preview = rollback_preview(task=two_tickets, checkpoint=checkpoint)
    # Newest first: OPS-2's opening was not reviewed, OPS-1's was.
    assert [c["review"] for c in preview.compensations] == [False, True]
    harness_yaml(
        NO_REVIEW_CONFIG.replace(
            "review_rules: []",
            "review_rules:\n  - {name: closing-ok, tool: close_ticket, action: allow}",
        )
    )
    preview = rollback_preview(task=two_tickets, checkpoint=checkpoint)
    assert [c["review"] for c in preview.compensations] == [False, False]


def test_only_irreversible_and_uncompensated_calls_cannot_be_undone(
    operator, make_task, run_inline, harness_yaml
):
    harness_yaml(ALLOW_COMMANDS)
    task = make_task(
        spec_dict(
            {"call": "write_file", "args": {"path": "a.txt", "content": "1"}},
            {"call": "open_ticket", "args": {"title": "API down", "severity": 1}},
            {"call": "send_email", "args": {"to": "ops@example.com", "subject": "API down"}},
            {"call": "ledger_append", "args": {"key": "invoice-7", "value": "sent"}},
            {"call": "run_command", "args": {"command": "ls"}},
            {"call": "write_file", "args": {"path": "b.txt", "content": "2"}},
            {"final": "done"},
            tools=["write_file", "open_ticket", "send_email", "ledger_append", "run_command"],
        ),
        user=operator,
    )
    assert run_inline(task) == "succeeded", task.error_message
    command = ToolCall.objects.get(task=task, tool="run_command")
    assert command.status == "succeeded", command.error_message
    preview = rollback_preview(task=task, checkpoint=checkpoint_after_step(task, 1))
    assert [c["tool"] for c in preview.calls_undone] == [
        "open_ticket",
        "send_email",
        "ledger_append",
        "run_command",
        "write_file",
    ]
    assert [c["tool"] for c in preview.compensations] == ["close_ticket"]
    assert [(c["tool"], c["why"].split(":")[0]) for c in preview.irreversible] == [
        ("send_email", "declared irreversible"),
        ("ledger_append", "no compensation declared"),
    ]
    assert preview.files_delete == ["b.txt"]


def test_a_compensation_that_cannot_be_computed_is_listed_with_its_reason(
    two_tickets,
):
    row = ToolCall.objects.filter(task=two_tickets, tool="open_ticket").order_by("id")[1]
    ToolCall.objects.filter(pk=row.pk).update(result={"created": True})  # no key
    preview = rollback_preview(task=two_tickets, checkpoint=checkpoint_after_step(two_tickets, 1))
    assert [c["arguments"] for c in preview.compensations] == [{"key": "OPS-1"}]
    [item] = preview.irreversible
    assert item["call_id"] == row.call_id
    assert item["why"].startswith("compensation could not be computed: close_ticket arguments")
    assert "KeyError" in item["why"]


def test_a_call_that_failed_or_never_ran_is_in_neither_list(two_tickets):
    rows = list(ToolCall.objects.filter(task=two_tickets, tool="open_ticket").order_by("id"))
    ToolCall.objects.filter(pk=rows[0].pk).update(status="failed", result=None)
    ToolCall.objects.filter(pk=rows[1].pk).update(status="rejected")
    preview = rollback_preview(task=two_tickets, checkpoint=checkpoint_after_step(two_tickets, 1))
    assert preview.compensations == [] and preview.irreversible == []


def test_a_call_with_an_unknown_outcome_is_planned_for_a_person_first(two_tickets):
    row = ToolCall.objects.filter(task=two_tickets, tool="open_ticket").order_by("id")[1]
    ToolCall.objects.filter(pk=row.pk).update(status="unknown_outcome", result=None)
    preview = rollback_preview(task=two_tickets, checkpoint=checkpoint_after_step(two_tickets, 1))
    unknown, known = preview.compensations
    assert unknown["call_id"] == row.call_id and unknown["outcome_unknown"]
    assert unknown["arguments"] is None and "result" in unknown["unresolved"]
    assert unknown["review"]
    assert not known["outcome_unknown"] and known["arguments"] == {"key": "OPS-1"}


def test_the_api_preview_carries_both_lists(two_tickets, api_client, viewer):
    checkpoint = checkpoint_after_step(two_tickets, 1)
    response = api_client(viewer).get(
        f"/api/v1/tasks/{two_tickets.id}/rollback/preview", {"checkpoint_id": str(checkpoint.id)}
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert [(c["tool"], c["arguments"], c["review"]) for c in body["compensations"]] == [
        ("close_ticket", {"key": "OPS-2"}, False),
        ("close_ticket", {"key": "OPS-1"}, False),
    ]
    assert body["irreversible"] == []
    assert body["files_restore"] == ["notes.txt"]  # the existing fields keep working


def test_the_page_shows_restored_compensated_and_cannot_be_undone(two_tickets, client, operator):
    client.force_login(operator)
    checkpoint = checkpoint_after_step(two_tickets, 1)
    url = f"/tasks/{two_tickets.id}/checkpoints/{checkpoint.id}/rollback/"
    page = client.get(url).content.decode()
    assert 'data-testid="files-restore"' in page and "notes.txt" in page
    compensated = page.split('data-testid="compensations"')[1].split("</table>")[0]
    assert compensated.index("OPS-2") < compensated.index("OPS-1")
    assert compensated.count("close_ticket") == 2
    assert "runs without review" in compensated
    assert 'data-testid="irreversible"' not in page
