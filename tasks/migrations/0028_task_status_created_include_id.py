"""task_status_created also holds the task's id, so the list's count reads the failed tasks
from the index alone (tasks.web.pagination).

The index is rebuilt without locking the task table against the workers' writes: on PostgreSQL
it is dropped and built again CONCURRENTLY (a plain CREATE INDEX holds a SHARE lock, which
blocks every status change, heartbeat and lease for the whole build: seconds on a million
tasks), hence no transaction around the migration. A build that failed half-way leaves an
invalid index of that name; running the migration again drops it and builds it anew. Between
the drop and the build, the list's queries go without it (slower, never blocked).

Migrations after this one do the same for the tables every worker writes (the guard:
tests/test_migrations_online.py)."""

from django.conf import settings
from django.db import migrations, models

NAME = "task_status_created"
OLD = models.Index(fields=["status", "-created_at"], name=NAME)
NEW = models.Index(fields=["status", "-created_at"], include=("id",), name=NAME)


def _rebuild(apps, schema_editor, index):
    task = apps.get_model("tasks", "Task")
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{NAME}"')
        schema_editor.add_index(task, index, concurrently=True)
        return
    schema_editor.execute(f'DROP INDEX IF EXISTS "{NAME}"')
    schema_editor.add_index(task, index)


def forwards(apps, schema_editor):
    _rebuild(apps, schema_editor, NEW)


def backwards(apps, schema_editor):
    _rebuild(apps, schema_editor, OLD)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("checkpoints", "0008_checkpoint_subject"),
        ("tasks", "0027_plan_runs"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveIndex(model_name="task", name=NAME),
                migrations.AddIndex(model_name="task", index=NEW),
            ],
            database_operations=[migrations.RunPython(forwards, backwards, elidable=False)],
        ),
    ]
