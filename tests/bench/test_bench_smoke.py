"""Every benchmark runs at its tiny `smoke` size, so the scripts keep working as the code
changes. No timing assertions here: speed is measured and judged by `python -m bench run`."""

from __future__ import annotations

import json
import math

import pytest

from bench.common import results_load
from bench.hosts import unavailable
from bench.report import render
from bench.runner import benchmarks, run_all

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _harness_settings(harness_dirs, bench_processes_forked) -> None:
    pass


# The reference contenders each of these benchmarks measures beside ours, in the same run.
DBOS_ROWS = {
    "loop": "steps/s at 6 steps",
    "durable_write": "Durable write per step vs LangGraph",
    "approval": "Click (decision request sent) → approved tool running in an idle worker",
}


def test_the_runner_finds_the_benchmarks():
    assert {"durable_write", "loop"} <= set(benchmarks())


@pytest.mark.parametrize("name", sorted(benchmarks()))
def test_benchmark_runs_at_smoke_size_and_its_figures_reach_the_table(name, tmp_path):
    if name == "scaleout_hosts" and unavailable():
        pytest.skip(unavailable())
    results = tmp_path / "results"
    path = run_all(size="smoke", only=[name], results_dir=results)[name]

    document = json.loads(path.read_text())
    assert document["name"] == name and document["size"] == "smoke"
    assert {"cpu_count", "postgresql", "date"} <= set(document["environment"])
    assert document["figures"]
    for row in document["figures"]:
        assert row["ours"]["n"] >= 1 and math.isfinite(row["ours"]["median"])
        # A time between two processes' moments may be negative (they came the other way
        # round); any other figure is a positive measure.
        assert row["signed"] or row["ours"]["median"] > 0
        assert row["target"]
    table = render(results_load(results))
    for row in document["figures"]:
        assert row["figure"] in table
        for other in row.get("others", []):
            assert other["stats"]["n"] >= 1 and other["stats"]["median"] > 0
            assert f"{other['label']}: " in table
    if name in DBOS_ROWS:
        _dbos_measured_beside_ours(document, table, DBOS_ROWS[name])


def _dbos_measured_beside_ours(document, table, figure):
    """DBOS Transact (the `bench` extra) measured in the same run: its figure and ratio in the
    row, beside LangGraph's where the row has one."""
    rows = [r for r in document["figures"] if r["figure"].endswith(figure)]
    assert rows
    for row in rows:
        (dbos,) = [o for o in row["others"] if o["label"] == "DBOS"]
        assert dbos["stats"]["median"] > 0
        assert dbos["ratio"] == pytest.approx(row["ours"]["median"] / dbos["stats"]["median"])
        # The figure's own row: its cell is the figure, or the figure and " — " a breakdown
        # (not another figure that begins with this one's words, "... vs DBOS").
        cell = (f"| {row['figure']} |", f"| {row['figure']} — ")
        line = next(x for x in table.splitlines() if x.startswith(cell))
        assert "DBOS: " in line and "× DBOS" in line
