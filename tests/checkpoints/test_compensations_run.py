"""Confirming a rollback runs its compensations (issue #44 items 3-5): each an ordinary tool
call in the reverse order of the originals, under a key derived from the original's; a
compensation that fails for good stops the task naming the effect still in the world, for an
operator to retry, mark done or skip; a call whose outcome is unknown is compensated only once
a person has said it took effect; and the agent is told what was compensated and what not."""

from __future__ import annotations

import json

import pytest

from checkpoints import recovery
from checkpoints.selectors import rollback_preview
from review.models import ReviewRequest
from review.services import review_resolve_unknown_outcome
from tasks.models import AuditEntry, ToolCall
from tasks.services import toolcall_transition
from tests.checkpoints.conftest import checkpoint_after_step, spec_dict
from tests.conftest import ApiClient, page_client

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _tickets(settings, tmp_path, monkeypatch):
    settings.HARNESS_TOOL_MODULES = ["examples.ticket_tools"]
    monkeypatch.setenv("HARNESS_EXAMPLE_TRACKER", str(tmp_path / "tracker.json"))


def tracker(tmp_path) -> dict:
    return json.loads((tmp_path / "tracker.json").read_text())


def write_tracker(tmp_path, data: dict) -> None:
    (tmp_path / "tracker.json").write_text(json.dumps(data))


def statuses(tmp_path) -> dict[str, str]:
    """The status of the tickets the task opened before the rollback."""
    return {t["key"]: t["status"] for t in tracker(tmp_path)["tickets"] if t["key"] <= "OPS-2"}


SCRIPT = [
    {"call": "write_file", "args": {"path": "notes.txt", "content": "v1\n"}},
    {"call": "open_ticket", "args": {"title": "API down", "severity": 1}},
    {"call": "open_ticket", "args": {"title": "DB slow", "severity": 2}},
    {"call": "write_file", "args": {"path": "notes.txt", "content": "v2\n"}},
    {"final": "filed"},
]


@pytest.fixture
def two_tickets(operator, make_task, run_inline, tmp_path):
    """Wrote notes.txt, opened OPS-1 and OPS-2, rewrote notes.txt. Run again after a rollback,
    the scripted agent does the same again (opening OPS-3 and OPS-4)."""
    task = make_task(spec_dict(*SCRIPT, tools=["write_file", "open_ticket"]), user=operator)
    assert run_inline(task) == "succeeded", task.error_message
    assert statuses(tmp_path) == {"OPS-1": "open", "OPS-2": "open"}
    return task


def rollback(task, operator, *, resume: bool = True):
    return recovery.checkpoint_rollback(
        task_id=task.id,
        checkpoint_id=checkpoint_after_step(task, 1).id,
        user=operator,
        reason="the tickets were filed against the wrong outage",
        resume=resume,
    )


def opened_ids(task) -> list[str]:
    return list(
        ToolCall.objects.filter(task=task, tool="open_ticket")
        .order_by("id")
        .values_list("call_id", flat=True)[:2]
    )


def test_rollback_closes_both_tickets_newest_first_and_tells_the_agent(
    two_tickets, operator, run_inline, tmp_path
):
    task = two_tickets
    first, second = opened_ids(task)
    result = rollback(task, operator)
    # Durable before acknowledged: the timeline shows the task compensating.
    compensating = task.events.get(type="compensating")
    assert [c["call_id"] for c in compensating.payload["compensations"]] == [
        f"{second}~undo",
        f"{first}~undo",
    ]
    assert result.task.status == "queued"

    assert run_inline(task) == "succeeded", task.error_message
    assert statuses(tmp_path) == {"OPS-1": "closed", "OPS-2": "closed"}
    closes = list(ToolCall.objects.filter(task=task, tool="close_ticket").order_by("id"))
    # Ordinary calls with their own ledger rows, in the reverse order of the originals.
    assert [(c.call_id, c.arguments, c.status) for c in closes] == [
        (f"{second}~undo", {"key": "OPS-2"}, "succeeded"),
        (f"{first}~undo", {"key": "OPS-1"}, "succeeded"),
    ]
    keys = {t["key"]: t["closed_by"] for t in tracker(tmp_path)["tickets"][:2]}
    assert keys == {"OPS-1": f"{task.id}:{first}~undo", "OPS-2": f"{task.id}:{second}~undo"}
    # The agent is told what was restored, compensated (with results) and not undone.
    aligned = task.events.get(type="context_aligned").payload
    assert "notes.txt" in aligned["undone"]["files_restored"]
    compensated = aligned["undone"]["compensated"]
    assert len(compensated) == 2 and "close_ticket" in compensated[0]
    assert '"closed": true' in compensated[0] and "OPS-2" in compensated[0]

    # Rolled back there again: the agent's new tickets are compensated; the compensations and
    # the calls they undid already are neither undone again nor listed as irreversible.
    preview = rollback_preview(task=task, checkpoint=checkpoint_after_step(task, 1))
    assert [c["arguments"] for c in preview.compensations] == [{"key": "OPS-4"}, {"key": "OPS-3"}]
    assert preview.irreversible == []
    assert {c["tool"] for c in preview.calls_undone} == {"open_ticket", "write_file"}
    assert first not in {c["call_id"] for c in preview.calls_undone}


def test_a_permanently_failing_compensation_names_the_effect_and_retry_completes_it(
    two_tickets, operator, run_inline, tmp_path
):
    task = two_tickets
    first, _ = opened_ids(task)
    # OPS-1 vanishes from the tracker (an outage of its own): closing it fails for good.
    data = tracker(tmp_path)
    kept = data["tickets"].pop(0)
    write_tracker(tmp_path, data)
    rollback(task, operator)

    assert run_inline(task) == "compensation_failed"
    assert task.status == "compensation_failed"
    assert task.error_class == "compensation_failed"
    assert f"open_ticket ({first})" in task.error_message
    assert "still in the world" in task.error_message and "no ticket OPS-1" in task.error_message
    # OPS-2's compensation ran before it; nothing after.
    assert statuses(tmp_path) == {"OPS-2": "closed"}

    data = tracker(tmp_path)
    data["tickets"].insert(0, kept)
    write_tracker(tmp_path, data)
    response = ApiClient(operator).post(
        f"/api/v1/tasks/{task.id}/compensation", {"decision": "retry", "comment": "it is back"}
    )
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "queued"
    assert run_inline(task) == "succeeded", task.error_message
    assert statuses(tmp_path) == {"OPS-1": "closed", "OPS-2": "closed"}
    entry = AuditEntry.objects.get(action="compensation_retry")
    assert entry.actor == operator and entry.reason == "it is back"
    again = ApiClient(operator).post(f"/api/v1/tasks/{task.id}/compensation", {"decision": "retry"})
    assert again.status_code == 409


def test_a_call_whose_outcome_is_unknown_is_not_compensated_before_a_person_decides(
    two_tickets, operator, run_inline, tmp_path
):
    task = two_tickets
    first, second = opened_ids(task)
    # Its worker died while OPS-2 was being opened: the ledger cannot tell whether it was.
    row = ToolCall.objects.get(task=task, call_id=second)
    toolcall_transition(call=row, to="running", fields={"result": None})
    toolcall_transition(call=row, to="unknown_outcome")
    rollback(task, operator)

    assert run_inline(task) == "paused"
    assert task.status == "waiting_review"
    review = ReviewRequest.objects.get(task=task, status="pending")
    assert review.kind == "unknown_outcome" and review.tool_call_id == row.id
    assert not ToolCall.objects.filter(task=task, tool="close_ticket").exists()
    assert statuses(tmp_path) == {"OPS-1": "open", "OPS-2": "open"}

    # A person checks the tracker: it was opened, as OPS-2.
    review_resolve_unknown_outcome(
        review_id=review.id,
        user=operator,
        decision="mark_done",
        result={"key": "OPS-2", "created": True},
        comment="it is in the tracker",
    )
    assert run_inline(task) == "succeeded", task.error_message
    assert statuses(tmp_path) == {"OPS-1": "closed", "OPS-2": "closed"}
    assert list(
        ToolCall.objects.filter(task=task, tool="close_ticket")
        .order_by("id")
        .values_list("call_id", flat=True)
    ) == [f"{second}~undo", f"{first}~undo"]


def test_an_operator_may_skip_a_failed_compensation_and_the_agent_is_told(
    two_tickets, operator, run_inline, tmp_path
):
    task = two_tickets
    data = tracker(tmp_path)
    data["tickets"].pop(0)
    write_tracker(tmp_path, data)
    rollback(task, operator)
    assert run_inline(task) == "compensation_failed"
    # The task page names the effect still in the world and offers the three choices.
    client = page_client(operator)
    page = client.get(f"/tasks/{task.id}/").content.decode()
    assert 'data-testid="compensation-failed"' in page and "still in the world" in page
    for choice in ("retry", "mark-done", "skip"):
        assert f'data-testid="compensation-{choice}"' in page
    client.post(
        f"/tasks/{task.id}/recover/",
        {"action": "compensation_skip", "reason": "closed it in the old tracker"},
    )
    task.refresh_from_db()
    assert task.status == "queued"
    assert AuditEntry.objects.get(action="compensation_skip").reason == (
        "closed it in the old tracker"
    )
    assert run_inline(task) == "succeeded", task.error_message
    aligned = task.events.get(type="context_aligned").payload
    assert len(aligned["undone"]["compensated"]) == 1
    (left,) = aligned["undone"]["not_undone"]
    assert "open_ticket" in left and "skipped by" in left
    assert "NOT undone" in " ".join(aligned["do_not_repeat"])


def test_a_rollback_held_runs_its_compensations_then_holds(
    two_tickets, operator, run_inline, tmp_path
):
    task = two_tickets
    result = rollback(task, operator, resume=False)
    assert result.task.status == "queued"
    assert run_inline(task) == "paused"
    assert task.status == "held"
    assert statuses(tmp_path) == {"OPS-1": "closed", "OPS-2": "closed"}
