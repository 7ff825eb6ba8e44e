"""The ledger's three indexes that others already serve are dropped: task_id alone (the unique
(task_id, call_id) and (task_id, tool) lead with it) and tool alone, with its LIKE twin
(toolcall_tool_status leads with it; nothing matches tools by pattern). Every call's intent
inserts a row and its outcome updates the status, an indexed column, so each index is
maintained twice a call.

Only the indexes change: the foreign key's constraint stays as it is (Django's own AlterField
would drop and re-add it, validating the whole table under lock). On PostgreSQL the indexes go
CONCURRENTLY (no lock against the workers' writes), hence no transaction around the migration."""

import django.db.models.deletion
from django.db import migrations, models

DROPPED = (
    "tasks_toolcall_task_id_73dcdae9",
    "tasks_toolcall_tool_74827de8",
    "tasks_toolcall_tool_74827de8_like",
)
# The indexes as Django made them, for a migration back.
RESTORED = {
    "postgresql": (
        'CREATE INDEX IF NOT EXISTS "tasks_toolcall_task_id_73dcdae9" '
        'ON "tasks_toolcall" ("task_id")',
        'CREATE INDEX IF NOT EXISTS "tasks_toolcall_tool_74827de8" ON "tasks_toolcall" ("tool")',
        'CREATE INDEX IF NOT EXISTS "tasks_toolcall_tool_74827de8_like" '
        'ON "tasks_toolcall" ("tool" varchar_pattern_ops)',
    ),
    "sqlite": (
        'CREATE INDEX IF NOT EXISTS "tasks_toolcall_task_id_73dcdae9" '
        'ON "tasks_toolcall" ("task_id")',
        'CREATE INDEX IF NOT EXISTS "tasks_toolcall_tool_74827de8" ON "tasks_toolcall" ("tool")',
    ),
}


def drop_indexes(apps, schema_editor):
    concurrently = " CONCURRENTLY" if schema_editor.connection.vendor == "postgresql" else ""
    for name in DROPPED:
        schema_editor.execute(f'DROP INDEX{concurrently} IF EXISTS "{name}"')


def restore_indexes(apps, schema_editor):
    for sql in RESTORED.get(schema_editor.connection.vendor, ()):
        schema_editor.execute(sql)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("tasks", "0028_task_status_created_include_id"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="toolcall",
                    name="task",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="tool_calls",
                        to="tasks.task",
                    ),
                ),
                migrations.AlterField(
                    model_name="toolcall",
                    name="tool",
                    field=models.CharField(max_length=100),
                ),
            ],
            database_operations=[
                migrations.RunPython(drop_indexes, restore_indexes, elidable=False),
            ],
        ),
    ]
