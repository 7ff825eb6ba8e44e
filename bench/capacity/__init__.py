"""(info) The capacity model's inputs (docs/scaling.md): what one agent step, one decision and
one dashboard page view cost PostgreSQL and Redis, counted on the real code paths.

- A step: `task_run` in-process (as bench/loop), read-only (`noop`) and `write_file` steps.
  Each variant runs a task of `steps` and one of 2×`steps` steps; the marginal cost of a step
  is the difference ÷ `steps` (a task's fixed cost — acquisition, first checkpoint, final
  answer — cancels out) and the task's fixed cost what is left of the smaller run.
- A decision: a `ledger_append` task paused for review in-process; the operator's approval
  through `POST /api/v1/reviews/{id}/decision` (Bearer token, the full API stack), then the
  resume job taken off the `resume` queue (`Queue.dequeue_any`, as an idle worker does) and
  performed here: lease, re-check, the tool, the final answer. RQ's own worker bookkeeping
  around a job (registries, heartbeats: about eight Redis round trips, bench/approval) is not
  in the worker's count. Also the bytes a task waiting for review holds.
- A page view: the task page of the larger `write_file` task, the review inbox (one review
  pending), the failure statistics and the review SLA page (24 h), through Django's test
  client as a logged-in operator, each after one warm-up view.

Counted (bench/capacity/probe.py): SQL statements from every thread of this process and the
commits (round trips = statements + BEGIN and COMMIT per transaction), rows inserted /
updated / deleted per table (each statement's rowcount), Redis commands and round trips
(redis-py, a pipeline one round trip; a step's are the metrics buffer's flushes,
harness_base/metrics.py, at most one a second: they follow time, not steps), WAL bytes
(pg_current_wal_lsn before and after), CPU seconds of this process and of this database's
PostgreSQL backends (/proc). Statement, row and
Redis counts are deterministic. WAL is server-wide: other databases on the same server add to
it, so the figure is the smallest over the repetitions (an upper bound on a shared server).
CPU moves with load: indicative. Bytes: pg_column_size of the rows each run left, per table
(heap tuples; indexes come on top — details.indexes lists each table's count).

Expected run time (quiet 2-CPU machine): smoke ~10 s; full ~1 min.
"""

from __future__ import annotations

from statistics import mean
from typing import Any

from bench.capacity.probe import Cost, cost_minus
from bench.capacity.scenarios import Operator, cleanup, decision_cost, page_costs, steps_cost
from bench.common import figure

TITLE = "Capacity model inputs: cost per step, decision and page view"


SIZES = {"smoke": {"steps": 4, "repeat": 1}, "full": {"steps": 100, "repeat": 10}}


def _one(value: float) -> dict[str, float]:
    return {"median": value, "p95": value, "n": 1}


def _least(costs: list[Cost], per: float) -> dict[str, Any]:
    """Per-unit cost: counts from the first run (they do not vary), WAL the least of the runs
    (server-wide, so others only add), CPU the mean (backends' CPU comes in 10 ms ticks)."""
    out = costs[0].as_dict(per)
    out["wal_bytes"] = round(min(c.wal_bytes for c in costs) / per)
    out["cpu_app_ms"] = round(mean(c.cpu_app_s for c in costs) * 1000 / per, 3)
    out["cpu_db_ms"] = round(mean(c.cpu_db_s for c in costs) * 1000 / per, 3)
    return out


def _steps(steps: int, repeat: int) -> tuple[dict[str, Any], Any]:
    """({variant: {step, task_fixed, bytes_per_step}}, the last large write task to view)."""
    out: dict[str, Any] = {}
    keep = None
    for variant in ("read", "write"):
        small, large, marginal, sizes = [], [], [], {}
        for i in range(repeat):
            cost_small, _, task = steps_cost(variant, steps)
            cleanup(task)
            cost_large, sizes, task = steps_cost(variant, 2 * steps)
            small.append(cost_small)
            large.append(cost_large)
            marginal.append(cost_minus(cost_large, cost_small))
            if variant == "write" and i == repeat - 1:
                keep = task
            else:
                cleanup(task)
        step = marginal[0].as_dict(steps)
        whole = _least(large, 2 * steps)
        step.update({k: whole[k] for k in ("wal_bytes", "cpu_app_ms", "cpu_db_ms")})
        fixed = cost_minus(small[0], marginal[0]).as_dict()
        out[variant] = {
            "step": step,
            "task_fixed": {
                k: fixed[k]
                for k in ("round_trips", "transactions", "rows_written", "redis_commands")
            },
            "bytes_per_step": {t: round(b / (2 * steps)) for t, b in sizes.items()},
        }
    return out, keep


def _indexes() -> dict[str, int]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tablename, count(*) FROM pg_indexes WHERE schemaname = 'public'"
            " GROUP BY 1 ORDER BY 1"
        )
        return dict(cursor.fetchall())


def _figures(steps: dict[str, Any], decision: dict[str, Any], pages: dict[str, Any]) -> list:
    figures = []
    units = (
        ("round_trips", "PostgreSQL round trips"),
        ("rows_written", "rows written"),
        ("wal_bytes", "WAL bytes"),
        ("redis_round_trips", "Redis round trips"),
    )
    work = {
        "read-only step": steps["read"]["step"],
        "write_file step": steps["write"]["step"],
        "decision (API request)": decision["web"],
        "decision (resume job)": decision["worker"],
        **{f"page view: {label}": cost for label, cost in pages.items()},
    }
    for label, cost in work.items():
        for key, unit in units:
            if cost[key] > 0:
                figures.append(
                    figure(
                        figure=f"{label}: {unit}", unit=unit, ours=_one(cost[key]), target="(info)"
                    )
                )
    for variant, tool in (("read", "read-only"), ("write", "write_file")):
        stored = sum(steps[variant]["bytes_per_step"].values())
        figures.append(
            figure(
                figure=f"{tool} step: bytes stored", unit="B", ours=_one(stored), target="(info)"
            )
        )
    waiting = sum(decision["waiting"].values())
    figures.append(
        figure(
            figure="a task waiting for review: bytes stored",
            unit="B",
            ours=_one(waiting),
            target="(info)",
        )
    )
    return figures


def run(size: str) -> dict[str, Any]:
    params = SIZES[size]
    steps, big = _steps(params["steps"], params["repeat"])
    operator = Operator()
    try:
        # The first decision warms this process up (URLs, templates, the API's imports).
        decisions = [decision_cost(operator) for _ in range(params["repeat"] + 1)][1:]
        views = page_costs(operator, big.id, params["repeat"])
    finally:
        cleanup(big)
        operator.close()
    decision = {
        "web": _least([d["web"] for d in decisions], 1),
        "worker": _least([d["worker"] for d in decisions], 1),
        "waiting": decisions[0]["waiting"],
    }
    pages = {label: _least(costs, 1) for label, costs in views.items()}
    return {
        "title": TITLE,
        "figures": _figures(steps, decision, pages),
        "notes": (
            "Counted in this process on the real code paths (bench/capacity/'s docstring): "
            f"steps as the marginal cost between tasks of {params['steps']} and "
            f"{2 * params['steps']} steps; a decision as its API request and its resume job; "
            "page views through Django's test client. Counts are deterministic; WAL is the "
            "least over the repetitions of a server-wide figure; CPU (details) is indicative "
            "on a loaded machine. docs/scaling.md turns these into a deployment's needs."
        ),
        "details": {
            "steps": steps,
            "decision": decision,
            "pages": pages,
            "indexes": _indexes(),
            "params": params,
        },
    }
