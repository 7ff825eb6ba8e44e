"""The chaos suite's short form (`python -m bench chaos --short`: a few injections of every
fault, on a PostgreSQL and a Redis of its own) keeps every promise: no effect executed twice or
missing, no approval lost, asked twice or consumed without a run, no task lost, no worker dead
of a fault it should survive, every recovery within its fault's bound."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.chaos import FAULTS, INVARIANTS

# A group of its own, which tests/conftest.py sorts first: the longest single test but for the
# fuzzing shards, started while every other process still has work to take.
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("chaos")]

ROOT = Path(__file__).resolve().parents[2]


def test_the_short_chaos_suite_keeps_every_promise(tmp_path):
    figures = tmp_path / "chaos.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench", "chaos", "--short", "--json", str(figures)],
        cwd=ROOT,
        env=dict(os.environ, HARNESS_ENABLE_TEST_TOOLS="1"),
        capture_output=True,
        text=True,
        timeout=900,
    )
    output = done.stdout + done.stderr[-20_000:]
    assert figures.exists(), output
    faults = {row["fault"]: row for row in json.loads(figures.read_text())["faults"]}
    skipped = json.loads(figures.read_text())["meta"].get("skipped", {})

    assert set(faults) | set(skipped) == {fault.name for fault in FAULTS}, output
    for name, row in faults.items():
        assert row["injected"] >= 1, (name, output)
        # A figure a fault does not count (spurious redispatches: the clock jump's) is absent.
        # On a broken promise the suite prints its processes' logs: the tail of its output.
        assert {key: row.get(key, 0) for key in INVARIANTS} == dict.fromkeys(INVARIANTS, 0), (
            name,
            row,
            output[-20_000:],
        )
        assert row["effects_executed"] == row["effects_expected"], (name, row, output[-20_000:])
        assert row["unrecovered"] == 0 and row["recovery_max_s"] <= row["bound_s"], (
            name,
            row,
            output[-20_000:],
        )
    assert done.returncode == 0, output
