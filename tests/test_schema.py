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


# The tables every step of a run writes (rows inserted, the ledger's updated): each index on
# them is maintained by each of those writes.
STEP_TABLES = ("tasks_toolcall", "tasks_taskevent", "checkpoints_checkpoint")


def _redundant_indexes(tables: tuple[str, ...]) -> list[str]:
    """Indexes on `tables` that another index already serves: neither unique nor partial,
    their columns the leading columns of another btree index of the table."""
    with connection.cursor() as cur:
        cur.execute(
            """SELECT i.indrelid::regclass::text, i.indexrelid::regclass::text,
                      o.indexrelid::regclass::text
                FROM pg_index i
                JOIN pg_index o ON o.indrelid = i.indrelid AND o.indexrelid <> i.indexrelid
                JOIN pg_class oc ON oc.oid = o.indexrelid
                JOIN pg_am am ON am.oid = oc.relam AND am.amname = 'btree'
                WHERE i.indrelid::regclass::text = ANY(%s)
                  AND NOT i.indisunique AND i.indpred IS NULL AND i.indexprs IS NULL
                  AND i.indnatts <= o.indnkeyatts
                  AND (o.indkey::int2[])[0:i.indnatts - 1] = (i.indkey::int2[])[0:i.indnatts - 1]
                ORDER BY 1, 2, 3""",
            [list(tables)],
        )
        return [f"{table}: {index} (served by {other})" for table, index, other in cur.fetchall()]


def test_the_step_tables_carry_no_index_another_one_serves() -> None:
    """The ledger had task_id and tool indexed alone (and tool for LIKE, which nothing uses)
    beside indexes leading with them: three index updates more for every call's intent and
    outcome."""
    assert _redundant_indexes(STEP_TABLES) == []


def test_the_redundant_index_scan_sees_a_redundant_index() -> None:
    with connection.cursor() as cur:
        cur.execute('CREATE INDEX "probe_toolcall_task" ON "tasks_toolcall" ("task_id")')
    assert _redundant_indexes(("tasks_toolcall",)) == [
        "tasks_toolcall: probe_toolcall_task (served by toolcall_task_callid)",
        "tasks_toolcall: probe_toolcall_task (served by toolcall_task_tool)",
    ]
