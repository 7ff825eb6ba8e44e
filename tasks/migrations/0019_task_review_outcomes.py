from datetime import UTC

from django.db import migrations, models
from django.db.models.functions import Trunc

# Count what people decided so far: calls rejected, and approved with edited arguments, by a
# person (a policy review or a LangGraph interrupt; not a standing rule's allowance, an expiry or
# an unknown outcome's resolution), as review.services now counts each new decision. Plain SQL:
# PostgreSQL and SQLite.
COUNT = """
UPDATE tasks_task SET {field} = (
    SELECT COUNT(*) FROM review_reviewrequest r
    WHERE r.task_id = tasks_task.id AND r.kind IN ('policy', 'langgraph') AND {where}
)
WHERE id IN (
    SELECT r.task_id FROM review_reviewrequest r
    WHERE r.kind IN ('policy', 'langgraph') AND {where}
)
"""
REJECTED = "r.status = 'rejected' AND r.decided_by_id IS NOT NULL"
EDITED = "r.status = 'approved' AND r.edited_arguments IS NOT NULL"


def _stale_hours(apps, schema_editor) -> None:
    """The rolled hours of the finished tasks just counted are rolled again by the sweep."""
    Task = apps.get_model("tasks", "Task")
    RolledHour = apps.get_model("tasks", "RolledHour")
    hours = sorted(
        set(
            Task.objects.filter(finished_at__isnull=False)
            .filter(models.Q(calls_rejected__gt=0) | models.Q(calls_edited__gt=0))
            .annotate(h=Trunc("finished_at", "hour", tzinfo=UTC))
            .values_list("h", flat=True)
            .distinct()
        )
    )
    for start in range(0, len(hours), 500):
        RolledHour.objects.filter(hour__in=hours[start : start + 500]).update(stale=True)


class Migration(migrations.Migration):
    dependencies = [
        ("tasks", "0018_canceled_calls_not_failures"),
        ("review", "0012_review_sla"),
    ]

    operations = [
        migrations.AddField(
            model_name="task",
            name="calls_edited",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="task",
            name="calls_rejected",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="taskhourly",
            name="with_edited",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="taskhourly",
            name="with_rejected",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.RunSQL(
            COUNT.format(field="calls_rejected", where=REJECTED),
            reverse_sql=migrations.RunSQL.noop,
        ),
        migrations.RunSQL(
            COUNT.format(field="calls_edited", where=EDITED), reverse_sql=migrations.RunSQL.noop
        ),
        migrations.RunPython(_stale_hours, migrations.RunPython.noop),
    ]
