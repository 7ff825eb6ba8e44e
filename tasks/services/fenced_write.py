"""The worker's lease-fenced durable write (`task_fenced_write`): on PostgreSQL one statement,
the fenced UPDATE of the task row as a data-modifying CTE with every INSERT/UPDATE of the step
conditional on it. On the hot path of every step: measured by bench/durable_write/."""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

from django.core.exceptions import FieldDoesNotExist
from django.db import DEFAULT_DB_ALIAS, connection, connections, models, transaction
from django.db.models.functions import Now
from django.db.models.options import Options
from django.utils import timezone

from tasks.models import Task
from tasks.services.leases import task_fence
from tasks.states import (
    LeaseLost,
    TaskStatus,
)


def task_fenced_write(
    *,
    task_id: Any,
    epoch: int,
    inserts: Sequence[models.Model] = (),
    updates: Sequence[tuple[models.Model, Sequence[str]]] = (),
    inserts_if_absent: Sequence[models.Model] = (),
    **fields: Any,
) -> bool:
    """One durable write of a worker: prove it still holds the lease, update the task row
    (heartbeat + `fields`), insert the unsaved `inserts`, the `inserts_if_absent` whose
    primary key is not taken yet (immutable, content-addressed rows such as blobs) and save
    the `(row, update_fields)` pairs of `updates` — all or nothing. Returns the task's
    `cancel_requested` as of this write, so the loop needs no query of its own to notice a
    cancel. Raises LeaseLost, having written nothing.

    On PostgreSQL this is one statement: the fenced UPDATE is a data-modifying CTE and every
    INSERT/UPDATE is conditional on it, so the write costs one round trip and one implicit
    transaction (one WAL flush) instead of BEGIN + n statements + COMMIT. The row lock and
    the all-or-nothing outcome are those of the transaction it replaces."""
    if connection.vendor != "postgresql":
        with transaction.atomic():
            task_fence(task_id=task_id, epoch=epoch, **fields)
            for model, rows in _by_model(inserts_if_absent).items():
                model._default_manager.bulk_create(rows, ignore_conflicts=True)
            for row in inserts:
                row.save(force_insert=True)
            for row, update_fields in updates:
                row.save(update_fields=update_fields)
            return Task.objects.filter(id=task_id).values_list("cancel_requested", flat=True).get()
    db = connections[DEFAULT_DB_ALIAS]
    numbered, params, inserted = fenced_statement_for(
        db=db,
        task_id=task_id,
        epoch=epoch,
        fields=fields,
        inserts=inserts,
        updates=updates,
        inserts_if_absent=inserts_if_absent,
    )
    with _raw_cursor(db, prepare=_prepare(numbered)) as cursor:
        cursor.execute(numbered, params)
        result = cursor.fetchone()
    return fenced_result_apply(
        result, task_id=task_id, epoch=epoch, inserts=inserts, inserted=inserted
    )


def fenced_result_apply(
    result: Sequence[Any],
    *,
    task_id: Any,
    epoch: int,
    inserts: Sequence[models.Model],
    inserted: list[list[models.Model]],
) -> bool:
    """The fenced statement's result row taken in: LeaseLost when the fence refused it
    (nothing written), else the new primary keys set on the inserted rows, the rows marked
    saved, and the task's cancel_requested as of the write returned."""
    fenced, cancel_requested, *new_ids = result
    if not fenced:
        raise LeaseLost(f"task {task_id}: lease epoch {epoch} lost")
    for batch, ids in zip(inserted, new_ids, strict=True):
        for row, pk in zip(batch, ids or (), strict=False):
            row.pk = pk
    for row in inserts:
        row._state.adding = False
        row._state.db = DEFAULT_DB_ALIAS
    return bool(cancel_requested)


def _raw_cursor(db: Any, *, prepare: bool = False) -> Any:
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
    cursor = _cursor_class()(raw)
    cursor.prepare_statements = prepare
    return db.make_debug_cursor(cursor) if db.queries_logged else db.make_cursor(cursor)


@functools.cache
def _cursor_class() -> Any:
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


def _prepare(sql: str) -> bool:
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


def _numbered(sql: str) -> str:
    """`%s` placeholders (the statement has no other `%`) as PostgreSQL's `$1`, `$2`, ..."""
    parts = sql.split("%s")
    out = [parts[0]]
    for n, part in enumerate(parts[1:], start=1):
        out.append(_placeholder(n))
        out.append(part)
    return "".join(out)


def _column(opts: Options[Any], name: str) -> models.Field[Any, Any]:
    """The model's field `name`, a column (not a relation's reverse side)."""
    field = opts.get_field(name)
    if not isinstance(field, models.Field):
        raise FieldDoesNotExist(f"{opts.label}.{name} is not a column")
    return field


@functools.cache
def _insert_shape(model: type[models.Model]) -> tuple[list[Any], str, list[str], str | None]:
    """(columns, "table (col, …)", NULL placeholders by column, returned pk column) of an
    INSERT of `model`: the auto primary key is left to the database and returned."""
    qn = connection.ops.quote_name
    pk = model._meta.pk
    auto_pk = isinstance(pk, models.AutoField)  # BigAutoField too (AutoFieldMeta)
    columns = [f for f in model._meta.concrete_fields if not (f.primary_key and auto_pk)]
    # A bare NULL in VALUES would be typed text; name the column's type.
    nulls = [f"NULL::{f.db_type(connection)}" for f in columns]
    target = f"{qn(model._meta.db_table)} ({', '.join(qn(f.column) for f in columns)})"
    return columns, target, nulls, qn(pk.column) if auto_pk else None


def fenced_statement_for(
    *,
    db: Any,
    task_id: Any,
    epoch: int,
    fields: dict[str, Any],
    inserts: Sequence[models.Model],
    updates: Sequence[tuple[models.Model, Sequence[str]]],
    inserts_if_absent: Sequence[models.Model] = (),
) -> tuple[str, list[Any], list[list[models.Model]]]:
    """task_fenced_write's statement on PostgreSQL (`$n` placeholders; the heartbeat and
    updated_at set with `fields`) -> (sql, params, the batches of inserted rows whose auto
    primary keys the statement returns, in the order of its result columns);
    tasks.services.write_behind sends it from another thread. `db` is the connection itself,
    not the `django.db.connection` proxy, which costs a context-local lookup per attribute."""
    fields = {"heartbeat_at": Now(), "updated_at": timezone.now(), **fields}
    qn = db.ops.quote_name
    meta = Task._meta
    task_fields = [_column(meta, name) for name in fields]
    # Now() is the database's clock (heartbeats: see task_acquire).
    params: list[Any] = [
        f.get_db_prep_save(value, db)
        for f, value in zip(task_fields, fields.values(), strict=True)
        if not isinstance(value, Now)
    ]
    params += [meta.pk.get_db_prep_value(task_id, db), epoch, TaskStatus.RUNNING]
    ctes = [
        f"fence AS (UPDATE {qn(meta.db_table)} SET "
        + ", ".join(
            f"{qn(f.column)} = " + ("STATEMENT_TIMESTAMP()" if isinstance(value, Now) else "%s")
            for f, value in zip(task_fields, fields.values(), strict=True)
        )
        + f" WHERE {qn(meta.pk.column)} = %s AND {qn('lease_epoch')} = %s AND "
        f"{qn('status')} = %s RETURNING {qn('cancel_requested')})"
    ]
    for row, update_fields in updates:
        opts = row._meta
        changed = [_column(opts, name) for name in update_fields]
        ctes.append(
            f"w{len(ctes)} AS (UPDATE {qn(opts.db_table)} SET "
            + ", ".join(f"{qn(f.column)} = %s" for f in changed)
            + f" WHERE {qn(opts.pk.column)} = %s AND EXISTS (SELECT 1 FROM fence))"
        )
        params += [f.get_db_prep_save(f.pre_save(row, False), db) for f in changed]
        params.append(opts.pk.get_db_prep_value(row.pk, db))
    batches = [(model, batch, False) for model, batch in _by_model(inserts).items()]
    batches += [(model, batch, True) for model, batch in _by_model(inserts_if_absent).items()]
    returned: list[str] = []
    inserted: list[list[models.Model]] = []
    for model, batch, if_absent in batches:
        columns, target, nulls, returning = _insert_shape(model)
        values = _values_rows(batch, columns, nulls, db, params)
        name = f"w{len(ctes)}"
        ctes.append(
            f"{name} AS (INSERT INTO {target} SELECT * FROM (VALUES {', '.join(values)})"
            " AS v WHERE EXISTS (SELECT 1 FROM fence)"
            + (" ON CONFLICT DO NOTHING" if if_absent else "")
            + (f" RETURNING {returning})" if returning else ")")
        )
        if returning:
            returned.append(f"(SELECT array_agg({returning}) FROM {name})")
            inserted.append(batch)
    select = ", ".join(
        ["EXISTS (SELECT 1 FROM fence)", "(SELECT bool_or(cancel_requested) FROM fence)", *returned]
    )
    return _numbered(f"WITH {', '.join(ctes)} SELECT {select}"), params, inserted


def _values_rows(
    batch: Sequence[models.Model], columns: list[Any], nulls: list[str], db: Any, params: list[Any]
) -> list[str]:
    """Each row of `batch` as a VALUES tuple of `columns`, its values appended to `params` (a
    NULL written as its column's typed NULL, `nulls`)."""
    values = []
    for row in batch:
        placeholders = []
        for f, null in zip(columns, nulls, strict=True):
            value = f.get_db_prep_save(f.pre_save(row, True), db)
            if value is None:
                placeholders.append(null)
            else:
                placeholders.append("%s")
                params.append(value)
        values.append(f"({', '.join(placeholders)})")
    return values


def _by_model(rows: Iterable[models.Model]) -> dict[type[models.Model], list[models.Model]]:
    batches: dict[type[models.Model], list[models.Model]] = {}
    for row in rows:
        batches.setdefault(type(row), []).append(row)
    return batches
