"""Every benchmark runs at its tiny `smoke` size, so the scripts keep working as the code
changes. No timing assertions here: speed is measured and judged by `python -m bench run`."""

from __future__ import annotations

import json

import pytest

from bench.common import results_load
from bench.hosts import unavailable
from bench.report import render
from bench.runner import benchmarks, run_all

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _harness_settings(harness_dirs) -> None:
    pass


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
        assert row["ours"]["n"] >= 1 and row["ours"]["median"] > 0
        assert row["target"]
    table = render(results_load(results))
    for row in document["figures"]:
        assert row["figure"] in table
