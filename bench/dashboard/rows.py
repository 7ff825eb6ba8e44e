"""The seed's vocabulary and SQL helpers: the seeded users, rules, tools and failures, the
INSERT ... SELECT of a model's rows from SQL expressions, the one checkpoint payload."""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("bench")


TERMINAL_SQL = "('succeeded', 'failed', 'canceled')"


USER_PREFIX = "bench-dash-"


CREATORS = 5


# The seeded reviews: who decides them, the rules they matched and where they were decided.
REVIEWERS = 4


RULES = ["protected-config", "write-default", "execute-default", "network-egress", "secrets"]


VIAS = ["page", "page", "page", "api", "slack", "email"]


# Seeded decision receipts are numbered past any real one (they chain nothing).
RECEIPT_SEQ = 10**12


TOOLS = ["read_file", "write_file", "list_files", "run_command", "http_request", "search_text"]


# (error class, message template): the seeded failures; %s is a varying number.
FAILURES = [
    ("budget_exceeded", "max_steps=%s reached"),
    ("timeout", "session timeout: %ss exceeded (layer: session)"),
    ("model_error", "scripted model ran out of turns at turn %s"),
    ("transient", "HTTP 503 from upstream after %s attempts"),
    ("tool_crashed", "KeyError: 'field_%s'"),
    (
        "unknown_outcome",
        "call 0.%s.0 (ledger_append) was running when its worker stopped; "
        "its outcome is unknown and it is not idempotent",
    ),
]


def _h(expr: str, mult: int, mod: int) -> str:
    """A deterministic pseudo-random integer in [0, mod) from an integer SQL expression.
    (mod() rather than `%`, which would clash with the driver's placeholders.)"""
    return f"mod(mod(({expr})::bigint * {mult}, 1000003), {mod})"


class Param:
    """A column value passed as a query parameter rather than written as SQL."""

    def __init__(self, value: Any) -> None:
        self.value = value


def _insert_select(model: Any, exprs: dict[str, str | Param], source: str) -> tuple[str, list[Any]]:
    """INSERT INTO <model's table> (every concrete column) SELECT … FROM <source>: the given SQL
    expressions, and for every other column its Django default as a parameter, so columns
    other apps add later get their defaults without this script knowing them."""
    from django.db import connection

    columns, selects, params = [], [], []
    for field in model._meta.concrete_fields:
        if field.primary_key and field.attname not in exprs:
            continue  # serial primary keys number themselves
        columns.append(connection.ops.quote_name(field.column))
        expr = exprs.get(field.attname)
        if isinstance(expr, Param):
            selects.append("%s")
            params.append(expr.value)
        elif expr is not None:
            selects.append(expr)
        elif field.null and not field.has_default():
            selects.append("NULL")
        else:
            selects.append("%s")
            params.append(field.get_db_prep_save(field.get_default(), connection))
    sql = (
        f"INSERT INTO {connection.ops.quote_name(model._meta.db_table)} "
        f"({', '.join(columns)}) SELECT {', '.join(selects)} FROM {source}"
    )
    return sql, params


def _checkpoint_payload() -> tuple[bytes, str, int]:
    from checkpoints.services import checkpoint_encode
    from tasks.agent_state import AgentState, Message

    state = AgentState(messages=[Message(role="user", content="benchmark the dashboard")])
    return checkpoint_encode(state=state, snapshot=None)


def _one_plain(sql: str) -> Any:
    from django.db import connection

    with connection.cursor() as cur:
        return _one(cur, sql)


def _has_task_id(model: Any) -> bool:
    return any(field.attname == "task_id" for field in model._meta.concrete_fields)


def _one(cur: Any, sql: str, params: list[Any] | None = None) -> Any:
    cur.execute(sql, params or [])
    return cur.fetchone()[0]
