"""The DBOS contender of the durable write: one DBOS step (DBOS Transact, `bench` extra only)
whose output is the bytes ours stores per step, inside a workflow that stays open — as a step
of a running agent loop is — on the same PostgreSQL (schema `bench_dbos`, bench.common.dbos_ref).

The workflow runs in DBOS's own executor thread and takes one request at a time from this
process; each step is timed inside the workflow (the call of the `@DBOS.step` until it returns,
its output durably recorded), so the hand-off between the threads is not charged to DBOS."""

from __future__ import annotations

import queue
import threading
import time
import uuid
from typing import Any

from bench.common.dbos_ref import SCHEMA, dbos_launch


class _Channel:
    def __init__(self) -> None:
        self.requests: queue.Queue[bytes | None] = queue.Queue()
        self.done = threading.Semaphore(0)
        self.seconds: list[float] = []


_CHANNELS: dict[str, _Channel] = {}


def _declare() -> Any:
    from dbos import DBOS

    @DBOS.step(name="bench.durable_write.step")
    def dbos_write_step(data: bytes) -> bytes:
        return data

    @DBOS.workflow(name="bench.durable_write.writer")
    def dbos_writer(token: str) -> int:
        channel = _CHANNELS[token]
        steps = 0
        while (data := channel.requests.get()) is not None:
            started = time.perf_counter()
            dbos_write_step(data)
            channel.seconds.append(time.perf_counter() - started)
            channel.done.release()
            steps += 1
        return steps

    return dbos_writer


# Declared at import, before DBOS is launched (the benchmark launches it when it starts).
_WRITER = _declare()


class Dbos:
    def __init__(self, data: bytes) -> None:
        from dbos import DBOS, SetWorkflowID

        dbos_launch()
        self.data = data
        self.token = uuid.uuid4().hex
        self.channel = _CHANNELS[self.token] = _Channel()
        with SetWorkflowID(self.token):
            self.handle = DBOS.start_workflow(_WRITER, self.token)

    def step(self) -> None:
        self.channel.requests.put(self.data)
        if not self.channel.done.acquire(timeout=60):
            raise RuntimeError("DBOS's writer workflow did not record the step")

    def samples(self, n: int) -> list[float]:
        """The last `n` steps' own times (the warm-up ones before them dropped)."""
        return self.channel.seconds[-n:]

    def stored_bytes_per_step(self) -> float:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT coalesce(avg(pg_column_size(o.*)), 0) FROM {SCHEMA}.operation_outputs o"
                " WHERE o.workflow_uuid = %s",
                [self.token],
            )
            return float(cursor.fetchone()[0])

    def close(self) -> None:
        self.channel.requests.put(None)
        self.handle.get_result()
        _CHANNELS.pop(self.token, None)
