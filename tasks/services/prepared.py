"""Statements on Django's PostgreSQL connection that psycopg sends as they are (`raw_cursor`:
`$n` placeholders, parameters apart from the SQL) and that PostgreSQL keeps prepared once a
statement's text has been sent PREPARE_AFTER times (`prepare_due`): the worker's fenced
writes (tasks.services.fenced_write, write_behind), the decision's write (locked_write) and
the review rules' read on every tool call (review.policy)."""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from typing import Any


def raw_cursor(db: Any, *, prepare: bool = False) -> Any:
    """A cursor on Django's PostgreSQL connection that sends parameters apart from the SQL
    (binary bytea, no escaping) and takes the statement's `$n` placeholders as they are: the
    fenced statement is long and its text changes with its rows, which psycopg would otherwise
    parse for `%s` on every write (beyond its cache's statement length). `prepare`: its
    statement is prepared on the connection (once; executed as prepared from then on).
    Wrapped as Django wraps its own cursors (execute wrappers, query logging)."""
    db.ensure_connection()
    raw = db.connection
    if prepare and raw.prepare_threshold is None:
        # Django turns psycopg's prepared statements off; with a threshold no query reaches,
        # only those executed with prepare=True are prepared.
        raw.prepare_threshold = NEVER_BY_COUNT
    cursor = cursor_class()(raw)
    cursor.prepare_statements = prepare
    return db.make_debug_cursor(cursor) if db.queries_logged else db.make_cursor(cursor)


@functools.cache
def cursor_class() -> Any:
    import psycopg

    class PreparingCursor(psycopg.RawCursor[Any]):
        """Executes with `prepare=prepare_statements` (Django's cursor wrapper passes no
        keyword arguments)."""

        prepare_statements = False

        # One signature for psycopg's overloads (query with params, or a template): it only
        # fills in `prepare` and passes everything on.
        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            kwargs.setdefault("prepare", self.prepare_statements or None)
            return super().execute(query, params, **kwargs)

    return PreparingCursor


# A fenced statement whose text (the shape of a step's write: which rows, which NULLs) this
# process has sent PREPARE_AFTER times is prepared on its connection: PostgreSQL then skips
# parsing and planning it (most of its server time besides the commit). Shapes seen once
# (a rare write) are not, so they fill neither psycopg's cache of prepared statements nor the
# server's. The statement's result types never change, so a migration cannot break a
# prepared one (PostgreSQL re-plans it).
PREPARE_AFTER = 2
NEVER_BY_COUNT = 2**31 - 1
SHAPES_KEPT = 256
_shapes: OrderedDict[str, int] = OrderedDict()
_shapes_lock = threading.Lock()


def prepare_due(sql: str) -> bool:
    with _shapes_lock:
        seen = _shapes.get(sql, 0) + 1
        _shapes[sql] = seen
        _shapes.move_to_end(sql)
        while len(_shapes) > SHAPES_KEPT:
            _shapes.popitem(last=False)
    return seen >= PREPARE_AFTER


@functools.cache
def _placeholder(n: int) -> str:
    return f"${n}"


def numbered(sql: str) -> str:
    """`%s` placeholders (the statement has no other `%`) as PostgreSQL's `$1`, `$2`, ..."""
    parts = sql.split("%s")
    out = [parts[0]]
    for n, part in enumerate(parts[1:], start=1):
        out.append(_placeholder(n))
        out.append(part)
    return "".join(out)
