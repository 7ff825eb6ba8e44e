"""The task state machine: the table, and the one function that applies it."""

from __future__ import annotations

import pytest

from tasks.services import task_transition
from tasks.states import TERMINAL, TRANSITIONS, IllegalTransition, TaskStatus, can_transition
from tests.factories import scripted_task

S = TaskStatus


@pytest.mark.parametrize(
    ("frm", "to"),
    [
        (S.PENDING, S.QUEUED),
        (S.QUEUED, S.RUNNING),
        (S.RUNNING, S.SUCCEEDED),
        (S.RUNNING, S.FAILED),
        (S.RUNNING, S.WAITING_REVIEW),
        (S.WAITING_REVIEW, S.QUEUED),
        (S.RUNNING, S.RETRY_WAIT),
        (S.RETRY_WAIT, S.QUEUED),
        (S.RUNNING, S.STALLED),
        (S.STALLED, S.QUEUED),
        (S.STALLED, S.FAILED),
        (S.PENDING, S.CANCELED),
        (S.QUEUED, S.CANCELED),
        (S.WAITING_REVIEW, S.CANCELED),
        (S.STALLED, S.CANCELED),
    ],
)
def test_design_transitions_are_allowed(frm, to):
    assert can_transition(frm, to)


@pytest.mark.parametrize(
    ("frm", "to"),
    [
        (S.PENDING, S.RUNNING),
        (S.QUEUED, S.SUCCEEDED),
        (S.WAITING_REVIEW, S.RUNNING),
        (S.SUCCEEDED, S.RUNNING),
        (S.CANCELED, S.FAILED),
        (S.RETRY_WAIT, S.RUNNING),
        (S.PENDING, S.WAITING_REVIEW),
    ],
)
def test_other_transitions_are_illegal(frm, to):
    assert not can_transition(frm, to)


def test_terminal_states_only_reopen_through_queued_or_an_operators_hold():
    for status in TERMINAL:
        assert TRANSITIONS[status] == {S.QUEUED, S.HELD}


def test_every_state_has_a_row():
    assert set(TRANSITIONS) == set(S.values)


@pytest.mark.django_db
def test_illegal_transition_raises_and_changes_nothing():
    task = scripted_task([{"final": "x"}])
    with pytest.raises(IllegalTransition):
        task_transition(task_id=task.id, to=S.SUCCEEDED)
    task.refresh_from_db()
    assert task.status == S.PENDING
    assert not task.events.filter(type="status").exists()


@pytest.mark.django_db
def test_each_transition_writes_one_status_event():
    task = scripted_task([{"final": "x"}])
    task_transition(task_id=task.id, to=S.QUEUED, reason="go")
    task_transition(task_id=task.id, to=S.CANCELED, reason="stop")
    events = list(task.events.filter(type="status").values_list("payload", flat=True))
    assert [(e["from"], e["to"]) for e in events] == [("pending", "queued"), ("queued", "canceled")]
