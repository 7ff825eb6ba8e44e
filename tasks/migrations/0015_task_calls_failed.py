from django.conf import settings
from django.db import migrations, models

# Finished tasks get the flag task_transition now sets when a task finishes: whether a tool
# call of the task had failed (or been retried) by then. Plain SQL: PostgreSQL and SQLite.
BACKFILL = """
UPDATE tasks_task SET calls_failed = TRUE
WHERE finished_at IS NOT NULL AND EXISTS (
    SELECT 1 FROM tasks_toolcall c
    WHERE c.task_id = tasks_task.id
      AND (c.status IN ('failed', 'timed_out', 'unknown_outcome') OR c.attempts > 1)
)
"""


class Migration(migrations.Migration):
    dependencies = [
        ("tasks", "0014_toolcall_created_at_proposed"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="task",
            name="calls_failed",
            field=models.BooleanField(default=False),
        ),
        migrations.RunSQL(BACKFILL, reverse_sql=migrations.RunSQL.noop),
        migrations.AddIndex(
            model_name="task",
            index=models.Index(
                condition=models.Q(("calls_failed", True), ("status", "succeeded")),
                fields=["finished_at"],
                name="task_succeeded_failed_calls",
            ),
        ),
    ]
