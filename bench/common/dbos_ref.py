"""DBOS, the reference contender of the SDK adapter benchmarks (issue 47 item 2): the same agent
made durable by DBOS's own integration (Pydantic AI's `DBOSDurability`, `dbos-openai-agents`'
`DBOSRunner`), which records each model request (and each tool declared a DBOS step) as a step
output in DBOS's system tables, on the same PostgreSQL as ours (schema SCHEMA, dropped after).

Installed for the benchmarks only (the `bench` extra: `dbos`, `dbos-openai-agents`). DBOS is
one instance per process: `dbos_launch` starts it once, after the contenders' workflows and
steps are declared (a benchmark declares them at import of its DBOS part); `dbos_stop` at
the end of the run drops the schema."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from bench.common.database import database_url

SCHEMA = "bench_dbos"
_LAUNCHED = {"yes": False}


def dbos_launch() -> None:
    from dbos import DBOS

    if _LAUNCHED["yes"]:
        return
    url = database_url().replace("postgres://", "postgresql://", 1)
    DBOS(
        config={
            "name": "harness-bench",
            "system_database_url": url,
            "dbos_system_schema": SCHEMA,
            "log_level": "WARNING",
        }
    )
    DBOS.launch()
    _LAUNCHED["yes"] = True


def dbos_run(workflow: Callable[..., Any], *args: Any) -> str:
    """Run `workflow(*args)` as a DBOS workflow of a new id; -> the id."""
    from dbos import SetWorkflowID

    workflow_id = uuid.uuid4().hex
    with SetWorkflowID(workflow_id):
        workflow(*args)
    return workflow_id


def dbos_stored_bytes(workflow_id: str) -> int:
    """What DBOS stored for one workflow: its status row (with its input and output) and its
    step outputs (`pg_column_size`, as ours is measured)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT (SELECT coalesce(sum(pg_column_size(o.*)), 0)"
            f"        FROM {SCHEMA}.operation_outputs o WHERE o.workflow_uuid = %(w)s)"
            f"     + (SELECT coalesce(sum(pg_column_size(s.*)), 0)"
            f"        FROM {SCHEMA}.workflow_status s WHERE s.workflow_uuid = %(w)s)",
            {"w": workflow_id},
        )
        return int(cursor.fetchone()[0])


def dbos_stop() -> None:
    from dbos import DBOS
    from django.db import connection

    if not _LAUNCHED["yes"]:
        return
    DBOS.destroy(destroy_registry=False)
    _LAUNCHED["yes"] = False
    with connection.cursor() as cursor:
        cursor.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
