"""The DBOS contender: the same agent loop as a DBOS workflow (DBOS Transact, `bench` extra
only) on the same PostgreSQL — per turn a model step (`@DBOS.step`: the scripted model's next
call, as our scripted model and LangGraph's fake chat model make it) and a tool step (nothing,
or the same atomic file write), each step's output recorded by DBOS in its system tables
(schema `bench_dbos`, bench.common.dbos_ref)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from bench.common import timed
from bench.common.dbos_ref import SCHEMA, dbos_launch, dbos_run
from bench.loop.ours import _call

_DIRECTORIES: dict[str, Path] = {}


def dbos_schema_bytes() -> int:
    """Every row in DBOS's schema (`pg_column_size` of whole rows, indexes excluded, as ours
    and LangGraph's are measured): its growth over a run is what the run stored."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = %s AND table_type = 'BASE TABLE'",
            [SCHEMA],
        )
        tables = [row[0] for row in cursor.fetchall()]
        total = 0
        for table in tables:
            cursor.execute(
                f'SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM {SCHEMA}."{table}" t'
            )
            total += int(cursor.fetchone()[0])
    return total


def _declare() -> Any:
    from dbos import DBOS

    @DBOS.step(name="bench.loop.model_step")
    def dbos_model_step(variant: str, i: int, steps: int, run: str) -> dict[str, Any]:
        if i >= steps:
            return {"final": "done"}
        name, args = _call(variant, i, run)
        return {"call": name, "args": args, "id": f"call_{i}"}

    @DBOS.step(name="bench.loop.tool_step")
    def dbos_tool_step(run: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
        if name == "noop":
            return {"ok": True}
        target = _DIRECTORIES[run] / args["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        data = args["content"].encode("utf-8")
        tmp = target.with_name(f".{target.name}.tmp")
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
        return {"path": args["path"], "bytes": len(data)}

    @DBOS.workflow(name="bench.loop.agent_loop")
    def dbos_agent_loop(variant: str, steps: int, run: str) -> int:
        done = 0
        while True:
            turn = dbos_model_step(variant, done, steps, run)
            if "final" in turn:
                return done
            dbos_tool_step(run, turn["call"], turn["args"])
            done += 1

    return dbos_agent_loop


# Declared at import, before DBOS is launched (a benchmark launches it when it starts).
_WORKFLOW = _declare()


class DbosAgent:
    def __init__(self) -> None:
        dbos_launch()
        self.root = Path(tempfile.mkdtemp(prefix="bench-loop-dbos-"))

    def run(self, steps: int, variant: str) -> None:
        import uuid

        run = uuid.uuid4().hex
        _DIRECTORIES[run] = self.root / run
        try:
            dbos_run(_WORKFLOW, variant, steps, run)
            if variant == "write" and len(list(_DIRECTORIES[run].rglob("*.txt"))) != steps:
                raise RuntimeError("DBOS's write step did not write every file")
        finally:
            shutil.rmtree(_DIRECTORIES.pop(run), ignore_errors=True)

    def samples(self, steps: int, repeat: int, variant: str = "read") -> tuple[list, list]:
        seconds, per_step = [], []
        for _ in range(repeat):
            before = dbos_schema_bytes()
            seconds.append(timed(lambda: self.run(steps, variant)))
            per_step.append((dbos_schema_bytes() - before) / steps)
        return seconds, per_step

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
