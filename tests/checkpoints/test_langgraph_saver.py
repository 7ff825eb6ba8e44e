"""DjangoCheckpointSaver against LangGraph's own conformance suite, on PostgreSQL (the test
database, in process) and on SQLite (a fresh file, in a subprocess), plus a real graph run on
SQLite with several threads writing at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.checkpoints.langgraph_conformance import ALL_CAPABILITIES, conformance_report
from tests.conftest import ROOT


def assert_full_conformance(report: dict) -> None:
    failures = {
        name: result["failures"]
        for name, result in report["results"].items()
        if result["passed"] is not True
    }
    assert not failures, json.dumps(failures, indent=2)
    assert set(report["results"]) == ALL_CAPABILITIES
    assert report["conformance_level"] == "FULL"


@pytest.mark.django_db(transaction=True)
def test_saver_passes_the_whole_conformance_suite_on_postgresql():
    report = conformance_report()

    assert report.passed_all_base()
    assert_full_conformance(report.to_dict())


def run_on_sqlite(tmp_path, module: str) -> subprocess.CompletedProcess:
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="harness_site.settings",
        DATABASE_URL=f"sqlite:///{tmp_path / 'harness.sqlite3'}",
        PYTHONPATH=str(ROOT),
    )
    return subprocess.run(
        [sys.executable, "-m", module],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_saver_passes_the_whole_conformance_suite_on_sqlite(tmp_path):
    done = run_on_sqlite(tmp_path, "tests.checkpoints.langgraph_conformance")

    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["passed_all_base"] is True
    assert_full_conformance(report)


def test_concurrent_graph_runs_with_interrupts_complete_on_sqlite(tmp_path):
    done = run_on_sqlite(tmp_path, "tests.checkpoints.langgraph_sqlite_run")

    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["vendor"] == "sqlite"
    assert "database is locked" not in done.stderr
    expected = sorted(["start", "b0", "b1", "b2", "b3", "gate:yes"])
    assert summary["results"] == [expected] * 20
    # input, start, the fan-out, the gate (interrupted), the gate again after the resume
    assert summary["history"] >= 4


@pytest.mark.django_db(transaction=True)
def test_saver_works_as_an_async_context_manager():
    import asyncio

    from langgraph.types import Command

    from checkpoints.langgraph import DjangoCheckpointSaver
    from tests.checkpoints.langgraph_sqlite_run import build_graph

    async def run() -> tuple[DjangoCheckpointSaver, tuple, list[str]]:
        async with DjangoCheckpointSaver() as saver:
            graph = build_graph(saver)
            config = {"configurable": {"thread_id": "async-with"}}
            await graph.ainvoke({"items": []}, config)
            paused_at = (await graph.aget_state(config)).next
            done = await graph.ainvoke(Command(resume="yes"), config)
        return saver, paused_at, done["items"]

    saver, paused_at, items = asyncio.run(run())
    assert paused_at == ("gate",)
    assert sorted(items) == ["b0", "b1", "b2", "b3", "gate:yes", "start"]
    assert saver._executor is None  # closed on exit, as `with` does
