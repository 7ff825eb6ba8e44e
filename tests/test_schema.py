"""The migrated PostgreSQL schema, read from the catalog.

A foreign key constraint makes every delete of a referenced row look up the referencing rows
(PostgreSQL's RI trigger, at commit for Django's deferred constraints). Without an index that
starts with the referencing column, that lookup is a sequential scan of the referencing
table per deleted row: deleting the checkpoints of a 100k-task database through the task
head's unindexed constraint kept one COMMIT at full CPU for over 40 minutes, and retention
scanned the task table once for every checkpoint it let go.
"""

from __future__ import annotations

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db


def _unindexed_foreign_keys(where: str) -> list[str]:
    """Foreign keys matching `where` (over pg_constraint c) with no index whose first column is
    the referencing column (an index partial on that column being NOT NULL counts)."""
    with connection.cursor() as cur:
        cur.execute(
            f"""SELECT c.conrelid::regclass::text, a.attname, c.confrelid::regclass::text
                FROM pg_constraint c
                JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
                WHERE c.contype = 'f' AND {where}
                  AND NOT EXISTS (
                      SELECT 1 FROM pg_index i
                      WHERE i.indrelid = c.conrelid AND i.indkey[0] = c.conkey[1]
                        AND (i.indpred IS NULL  -- or partial on NOT NULL, which `=` implies
                             OR pg_get_expr(i.indpred, i.indrelid)
                                = format('(%I IS NOT NULL)', a.attname)))
                ORDER BY 1, 2"""
        )
        return [f"{table}.{column} -> {target}" for table, column, target in cur.fetchall()]


def test_every_foreign_key_is_backed_by_an_index_on_its_column() -> None:
    assert _unindexed_foreign_keys("c.connamespace = 'public'::regnamespace") == []


def test_the_foreign_key_scan_sees_an_unindexed_constraint() -> None:
    """The catalog query finds what it is meant to find (so its pass above means something)."""
    with connection.cursor() as cur:
        cur.execute("CREATE TEMP TABLE fk_probe_parent (id int PRIMARY KEY)")
        cur.execute("CREATE TEMP TABLE fk_probe_child (parent_id int REFERENCES fk_probe_parent)")
    assert _unindexed_foreign_keys("c.conrelid = 'fk_probe_child'::regclass") == [
        "fk_probe_child.parent_id -> fk_probe_parent"
    ]
