"""A worker machine whose wall clock is hours off (or was stepped mid-run) does not time its
tasks out: session timeouts go by the database's clock, as leases do. Here
Django's clock (`timezone.now`, every reading of the wall clock the harness makes) is moved;
the chaos suite steps a whole worker host's (bench/chaos/, clock_jump)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db.models.functions import Now
from django.utils import timezone

from tasks.models import Task
from tests.factories import run_in_process, scripted_task

pytestmark = pytest.mark.django_db


@pytest.fixture
def clock_off(monkeypatch):
    """clock_off(hours): this process's wall clock that many hours off from now on."""
    true_now = timezone.now

    def set_offset(hours: float) -> None:
        monkeypatch.setattr(timezone, "now", lambda: true_now() + timedelta(hours=hours))

    return set_offset


def test_a_session_is_not_timed_out_by_a_worker_whose_clock_is_hours_ahead(
    harness_dirs, quiet_watchdog, clock_off
):
    task = scripted_task(
        [{"call": "list_files", "args": {}}, {"final": "done"}],
        ["list_files"],
        budget={"session_timeout_s": 600},
    )
    # The task began on a machine with a true clock (an earlier segment of its session)...
    Task.objects.filter(id=task.id).update(started_at=Now())
    # ...and carries on on one whose clock is two hours ahead.
    clock_off(2)

    assert run_in_process(task) == "succeeded", (task.error_class, task.error_message)
