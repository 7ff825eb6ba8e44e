"""Redis goes away while a worker runs a task, and comes back: the worker waits for it
(agent.worker.redis_retry) instead of quitting, and goes on taking jobs. Before, RQ's work loop
ended the worker on the first connection error outside its wait for a job (the chaos suite's
Redis restart counted a busy worker dead)."""

from __future__ import annotations

import time

import pytest

from agent.worker.redis_retry import patient_retry
from tests.factories import enqueued_task

from .conftest import wait_status

# How long Redis stays away once the task has finished: past redis-py's own retries (ten,
# jittered, capped at 1 s: 4.3 s at most), well within HARNESS_REDIS_RETRY_S (30 s).
OUTAGE_S = 8.0


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_a_worker_waits_out_redis_going_away_as_its_task_ends(redis_server, fleet):
    [worker] = fleet.worker(1)
    first = enqueued_task(
        [{"call": "sleep", "args": {"seconds": 1.0}}, {"final": "first"}], ["sleep"], title="a"
    )
    wait_status(first.id, "running")
    redis_server.stop()
    # The task ends in the database, which is up; RQ's bookkeeping of the job's end (in the
    # horse) and the worker's next heartbeat need Redis, and find it gone.
    wait_status(first.id, "succeeded")
    time.sleep(OUTAGE_S)  # the fault: an outage of a known length, not a wait for a condition
    assert worker.poll() is None, "the worker quit while Redis was away"
    redis_server.start()

    second = enqueued_task([{"final": "second"}], [], title="b")
    assert wait_status(second.id, "succeeded", timeout=60).result == "second"
    assert worker.poll() is None


@pytest.mark.parametrize("budget_s", [0.0, 1.0, 30.0, 300.0])
def test_the_retries_wait_as_long_as_the_budget_and_no_longer_than_a_second_more(budget_s):
    retry = patient_retry(budget_s)
    waits = [retry._backoff.compute(failure) for failure in range(1, retry._retries + 1)]
    assert budget_s <= sum(waits) < budget_s + 1.0
    assert max(waits, default=0.0) <= 1.0  # a Redis back is noticed within a second


@pytest.mark.parametrize("budget_s", [float("inf"), float("nan"), -1.0])
def test_a_budget_that_is_no_number_of_seconds_is_refused(budget_s):
    with pytest.raises(ValueError, match="HARNESS_REDIS_RETRY_S"):
        patient_retry(budget_s)
