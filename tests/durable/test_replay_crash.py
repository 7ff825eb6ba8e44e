"""A replay whose worker dies mid-run (issue #31): the sweep redispatches it, it resumes from its
newest checkpoint and finishes green, each recorded call answered once (a resumed replay's
oracle counts the calls it already made) and still no live side effect."""

from __future__ import annotations

import pytest

from agent.tools.testing import ledger_records
from cases.selectors import case_run_report
from cases.services import case_replay_start, case_save
from tasks.events import EventType
from tasks.models import TaskEvent, ToolCall
from tests.conftest import wait_for
from tests.factories import run_in_process, scripted_model, scripted_task

from .conftest import wait_status

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

TOOLS = ["write_file", "read_file", "ledger_append"]
SCRIPT = [
    {"call": "write_file", "args": {"path": "a.md", "content": "a\n"}},
    {"call": "ledger_append", "args": {"key": "replay-crash-1", "value": "1"}},
    {"call": "write_file", "args": {"path": "b.md", "content": "b\n"}},
    {"call": "read_file", "args": {"path": "a.md"}},
    {"call": "ledger_append", "args": {"key": "replay-crash-2", "value": "2"}},
    {"call": "write_file", "args": {"path": "c.md", "content": "c\n"}},
    {"final": "done"},
]


def test_a_replay_killed_mid_run_resumes_and_answers_each_recorded_call_once(fleet, operator):
    task = scripted_task(SCRIPT, TOOLS, user=operator)
    assert run_in_process(task) == "succeeded", task.error_message
    case = case_save(task=task, user=operator, name="crash mid replay")
    fleet.worker(2)
    fleet.sweeper()
    # A candidate model taking the recorded path, slowly: the worker dies inside a turn.
    slow = scripted_model(*({**turn, "delay_s": 0.4} for turn in SCRIPT))
    run = case_replay_start(case=case, user=operator, model=slow)
    wait_for(
        lambda: ToolCall.objects.filter(task_id=run.task_id, status="succeeded").count() >= 3,
        60,
        message="the replay to answer three calls",
    )
    fleet.kill_worker_of(run.task_id)

    wait_status(run.task_id, "succeeded", "failed", timeout=90)
    run.task.refresh_from_db()
    report = case_run_report(case_run=run)
    assert report["passed"], (report["state"], report["failures"], report["divergence"])
    assert TaskEvent.objects.filter(task_id=run.task_id, type=EventType.REDISPATCHED).exists()
    # Each recorded call answered once, none twice after the resume...
    calls = list(ToolCall.objects.filter(task_id=run.task_id).values_list("tool", "arguments"))
    assert len(calls) == len(SCRIPT) - 1
    assert sorted(map(str, calls)) == sorted(
        str((step["call"], step["args"])) for step in SCRIPT[:-1]
    )
    # ...and neither the replay nor its resume ran the external side effects.
    assert len(ledger_records(key="replay-crash-1")) == 1
    assert len(ledger_records(key="replay-crash-2")) == 1
