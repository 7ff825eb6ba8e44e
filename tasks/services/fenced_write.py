"""The worker's lease-fenced durable write (`task_fenced_write`): on PostgreSQL one statement,
the fenced UPDATE of the task row as a data-modifying CTE with every INSERT/UPDATE of the step
conditional on it. On the hot path of every step: measured by bench/durable_write/."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections, models, transaction
from django.db.models.functions import Now
from django.utils import timezone

from tasks.models import Task
from tasks.services.leases import task_fence
from tasks.services.prepared import numbered, prepare_due, raw_cursor
from tasks.services.statements import by_model, column, insert_shape, values_rows
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
            for model, rows in by_model(inserts_if_absent).items():
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
    with raw_cursor(db, prepare=prepare_due(numbered)) as cursor:
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
    task_fields = [column(meta, name) for name in fields]
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
        changed = [column(opts, name) for name in update_fields]
        ctes.append(
            f"w{len(ctes)} AS (UPDATE {qn(opts.db_table)} SET "
            + ", ".join(f"{qn(f.column)} = %s" for f in changed)
            + f" WHERE {qn(opts.pk.column)} = %s AND EXISTS (SELECT 1 FROM fence))"
        )
        params += [f.get_db_prep_save(f.pre_save(row, False), db) for f in changed]
        params.append(opts.pk.get_db_prep_value(row.pk, db))
    batches = [(model, batch, False) for model, batch in by_model(inserts).items()]
    batches += [(model, batch, True) for model, batch in by_model(inserts_if_absent).items()]
    returned: list[str] = []
    inserted: list[list[models.Model]] = []
    for model, batch, if_absent in batches:
        columns, target, nulls, returning = insert_shape(model)
        values = values_rows(batch, columns, nulls, db, params)
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
    return numbered(f"WITH {', '.join(ctes)} SELECT {select}"), params, inserted
