"""The parts of the one-statement writes (tasks.services.fenced_write, locked_write): a model's
columns (`column`), the shape of its INSERT (`insert_shape`), rows as VALUES tuples
(`values_rows`), rows grouped by model (`by_model`)."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Any

from django.core.exceptions import FieldDoesNotExist
from django.db import connection, models
from django.db.models.options import Options


def column(opts: Options[Any], name: str) -> models.Field[Any, Any]:
    """The model's field `name`, a column (not a relation's reverse side)."""
    field = opts.get_field(name)
    if not isinstance(field, models.Field):
        raise FieldDoesNotExist(f"{opts.label}.{name} is not a column")
    return field


@functools.cache
def insert_shape(model: type[models.Model]) -> tuple[list[Any], str, list[str], str | None]:
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


def values_rows(
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


def by_model(rows: Iterable[models.Model]) -> dict[type[models.Model], list[models.Model]]:
    batches: dict[type[models.Model], list[models.Model]] = {}
    for row in rows:
        batches.setdefault(type(row), []).append(row)
    return batches
