"""The capacity probe (bench/capacity/) counts what the capacity model in docs/scaling.md is
built from: the rows a step writes per table, the round trips and transactions, and the
Redis commands of a decision's enqueue — on the real code paths, the worker's included."""

from __future__ import annotations

import pytest

from bench.capacity.probe import cost_minus
from bench.capacity.scenarios import Operator, cleanup, decision_cost, steps_cost

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _harness_settings(harness_dirs) -> None:
    pass


def test_a_write_step_costs_its_rows_and_one_fenced_write_per_commit():
    small, _, task = steps_cost("write", 2)
    cleanup(task)
    large, sizes, task = steps_cost("write", 4)
    cleanup(task)
    step = cost_minus(large, small)
    # Two more write_file steps: each leaves one tool call and one tool output (the diff),
    # its checkpoints and events, through the fenced write's single statements.
    assert step.rows[("inserted", "tasks_toolcall")] == 2
    assert step.rows[("inserted", "tasks_tooloutput")] == 2
    assert step.rows[("inserted", "checkpoints_checkpoint")] >= 2
    assert step.rows[("inserted", "tasks_taskevent")] >= 2
    assert 0 < step.statements <= 4 * 2 and step.transactions >= 2
    assert step.redis_commands == 0  # a step talks to PostgreSQL only
    assert large.wal_bytes > 0 and sizes["tasks_tooloutput"] > 0


def test_a_decision_is_counted_on_the_web_and_on_the_worker_side():
    operator = Operator()
    try:
        cost = decision_cost(operator)
    finally:
        operator.close()
    web, worker = cost["web"], cost["worker"]
    assert web.rows[("inserted", "review_reviewapproval")] == 1
    assert web.commits >= 1 and web.redis_commands >= 1  # the resume job's enqueue
    assert worker.rows[("updated", "tasks_task")] >= 1 and worker.redis_commands >= 1
    assert cost["waiting"]["review_reviewrequest"] > 0
