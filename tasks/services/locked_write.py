"""Several rows written in one statement under locks the caller's transaction already holds
(`rows_write`): the decision's write (review.services.approve_plain) — the sibling of the
worker's lease-fenced write (tasks.services.fenced_write), without its fence. On the hot path
of every approval: measured by bench/approval/."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, models, transaction

from tasks.services.prepared import numbered, raw_cursor
from tasks.services.statements import by_model, column, insert_shape, values_rows
from tasks.states import TransitionConflict

# (model, the columns to set, the columns to match): an UPDATE of the rows that match, however
# many (a roll-up hour that may not have been rolled yet: none).
Mark = tuple[type[models.Model], Mapping[str, Any], Mapping[str, Any]]


def rows_write(
    *,
    inserts: Sequence[models.Model] = (),
    updates: Sequence[tuple[models.Model, Sequence[str]]] = (),
    marks: Sequence[Mark] = (),
) -> None:
    """Insert the unsaved `inserts` (their auto primary keys set on them), save the
    `(row, update_fields)` pairs of `updates` and apply `marks`, as one statement in the
    caller's transaction: one round trip instead of one per row. The caller holds the row locks
    that make these writes its own (task_lock: every writer of a task's rows takes it first),
    so each of `updates` finds its row; if one does not, TransitionConflict (the transaction
    is then the caller's to roll back)."""
    if not (inserts or updates or marks):
        return
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("rows_write runs inside the transaction that holds the locks")
    db = connections[DEFAULT_DB_ALIAS]
    if db.vendor != "postgresql":
        for row in inserts:
            row.save(force_insert=True)
        for row, fields in updates:
            row.save(update_fields=fields)  # DatabaseError when it finds no row
        for model, values, match in marks:
            model._default_manager.filter(**match).update(**values)
        return
    qn = db.ops.quote_name
    ctes: list[str] = []
    params: list[Any] = []
    counted: list[str] = []
    for row, update_fields in updates:
        opts = row._meta
        changed = [column(opts, name) for name in update_fields]
        name = f"w{len(ctes)}"
        ctes.append(
            f"{name} AS (UPDATE {qn(opts.db_table)} SET "
            + ", ".join(f"{qn(f.column)} = %s" for f in changed)
            + f" WHERE {qn(opts.pk.column)} = %s RETURNING 1)"
        )
        params += [f.get_db_prep_save(f.pre_save(row, False), db) for f in changed]
        params.append(opts.pk.get_db_prep_value(row.pk, db))
        counted.append(f"(SELECT count(*) FROM {name})")
    for model, values, match in marks:
        opts = model._meta
        sets = [(column(opts, key), value) for key, value in values.items()]
        wheres = [(column(opts, key), value) for key, value in match.items()]
        ctes.append(
            f"w{len(ctes)} AS (UPDATE {qn(opts.db_table)} SET "
            + ", ".join(f"{qn(f.column)} = %s" for f, _ in sets)
            + " WHERE "
            + " AND ".join(f"{qn(f.column)} = %s" for f, _ in wheres)
            + ")"
        )
        params += [f.get_db_prep_save(value, db) for f, value in sets]
        params += [f.get_db_prep_value(value, db) for f, value in wheres]
    returned: list[str] = []
    inserted: list[list[models.Model]] = []
    for model, batch in by_model(inserts).items():
        columns, target, nulls, returning = insert_shape(model)
        values_sql = values_rows(batch, columns, nulls, db, params)
        name = f"w{len(ctes)}"
        # A VALUES list is inserted in its order: the rows take their keys in the order given
        # (a task's events are read back by id).
        ctes.append(
            f"{name} AS (INSERT INTO {target} VALUES {', '.join(values_sql)}"
            + (f" RETURNING {returning})" if returning else ")")
        )
        if returning:
            returned.append(f"(SELECT array_agg({returning} ORDER BY {returning}) FROM {name})")
            inserted.append(batch)
    select = ", ".join([*counted, *returned] or ["1"])
    with raw_cursor(db) as cursor:
        cursor.execute(numbered(f"WITH {', '.join(ctes)} SELECT {select}"), params)
        result = cursor.fetchone()
    for (row, _fields), count in zip(updates, result[: len(counted)], strict=True):
        if count != 1:
            raise TransitionConflict(f"{row._meta.label} {row.pk} is gone or was not locked")
    for batch, ids in zip(inserted, result[len(counted) :], strict=True):
        for row, pk in zip(batch, ids or (), strict=False):
            row.pk = pk
    for row in inserts:
        row._state.adding = False
        row._state.db = db.alias
