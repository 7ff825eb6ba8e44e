"""Trigram indexes for the task list's free-text search (PostgreSQL only).

`icontains` compiles to UPPER(col::text) LIKE UPPER('%q%'), which no b-tree serves; GIN
trigram indexes on the same expressions do. pg_trgm is a trusted extension (PostgreSQL 13+),
so the database owner may create it. Other databases scan, as before."""

from django.db import migrations

INDEXES = {
    "task_title_trgm": "UPPER((title)::text) gin_trgm_ops",
    "task_goal_trgm": "UPPER(goal) gin_trgm_ops",
}


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    for name, expression in INDEXES.items():
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {name} ON tasks_task USING gin ({expression})")


def drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name in INDEXES:
        schema_editor.execute(f"DROP INDEX IF EXISTS {name}")


class Migration(migrations.Migration):
    dependencies = [("tasks", "0006_toolcall_stats_indexes")]
    operations = [migrations.RunPython(create, drop)]
