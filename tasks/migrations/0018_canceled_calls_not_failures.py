from datetime import UTC

from django.db import migrations
from django.db.models.functions import Trunc

# Calls an operator's cancel stopped (`failed`, error class `canceled`) no longer count as tool
# failures. Recompute `calls_failed` of the finished tasks that had one, and mark the rolled
# hours holding such calls (or such tasks' finishes) stale so the sweep rolls them again.
# Plain SQL: PostgreSQL and SQLite.
CANCELED = "c.status = 'failed' AND c.error_class = 'canceled'"
COUNTED = (
    "((c.status IN ('failed', 'timed_out', 'unknown_outcome') "
    "AND NOT (c.status = 'failed' AND c.error_class = 'canceled')) OR c.attempts > 1)"
)
RECOMPUTE = f"""
UPDATE tasks_task SET calls_failed = EXISTS (
    SELECT 1 FROM tasks_toolcall c WHERE c.task_id = tasks_task.id AND {COUNTED}
)
WHERE calls_failed AND EXISTS (
    SELECT 1 FROM tasks_toolcall c WHERE c.task_id = tasks_task.id AND {CANCELED}
)
"""


def _stale_hours(apps, schema_editor) -> None:
    ToolCall = apps.get_model("tasks", "ToolCall")
    Task = apps.get_model("tasks", "Task")
    RolledHour = apps.get_model("tasks", "RolledHour")
    canceled = ToolCall.objects.filter(status="failed", error_class="canceled")
    hours = set(
        canceled.annotate(h=Trunc("created_at", "hour", tzinfo=UTC))
        .values_list("h", flat=True)
        .distinct()
    )
    hours |= set(
        Task.objects.filter(id__in=canceled.values("task_id"), finished_at__isnull=False)
        .annotate(h=Trunc("finished_at", "hour", tzinfo=UTC))
        .values_list("h", flat=True)
        .distinct()
    )
    hours = sorted(hours)
    for start in range(0, len(hours), 500):
        RolledHour.objects.filter(hour__in=hours[start : start + 500]).update(stale=True)


class Migration(migrations.Migration):
    dependencies = [("tasks", "0017_statistics_task_rollups")]

    operations = [
        migrations.RunSQL(RECOMPUTE, reverse_sql=migrations.RunSQL.noop),
        migrations.RunPython(_stale_hours, migrations.RunPython.noop),
    ]
