"""The shared integration fixtures against the real parts: tasks created over the API run on
real rqworker processes (PostgreSQL + Redis) and reach the status a user would see."""

from __future__ import annotations

import os

import pytest

from tests.factories import scripted_spec

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_a_task_created_over_the_api_runs_to_success_on_a_real_worker(workers, task_api):
    task = task_api.run(
        scripted_spec(
            [{"call": "write_file", "args": {"path": "a.txt", "content": "hi"}}, {"final": "done"}],
            ["write_file"],
        )
    )
    assert task["result"] == "done"
    assert task["worker_id"]


def test_a_destructive_call_pauses_the_task_for_review(workers, task_api):
    task = task_api.run(
        {
            **scripted_spec(
                [{"call": "delete_file", "args": {"path": "old.log"}}, {"final": "done"}],
                ["delete_file"],
            ),
            "workspace": {"files": {"old.log": "x"}},
        },
        "waiting_review",
    )
    assert task["status"] == "waiting_review"


def test_killing_a_worker_ends_its_whole_process_group(worker_pool, wait_for):
    first, second = worker_pool.start(2)
    worker_pool.kill(first)

    def group_gone() -> bool:
        try:
            os.killpg(first.pid, 0)
        except ProcessLookupError:
            return True
        return False

    wait_for(group_gone, 10, message="the killed worker's process group to disappear")
    assert second.poll() is None
