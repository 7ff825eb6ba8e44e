"""Task.held_wait_s: time on hold (or stopped until an operator resumed the task), kept apart
from review_wait_s, which until now counted both. Existing tasks are split from their
`status` events: each span in `held` or a terminal status that ended in `queued` moves from
review_wait_s to held_wait_s."""

from django.db import migrations, models

HELD_LIKE = {"held", "succeeded", "failed", "canceled"}


def split_waits(apps, schema_editor):
    Task = apps.get_model("tasks", "Task")
    TaskEvent = apps.get_model("tasks", "TaskEvent")
    waited = Task.objects.filter(review_wait_s__gt=0).values_list("id", "review_wait_s")
    for task_id, review_wait_s in waited.iterator(chunk_size=500):
        held = 0.0
        entered = None
        events = (
            TaskEvent.objects.filter(task_id=task_id, type="status")
            .order_by("id")
            .values_list("created_at", "payload")
        )
        for at, payload in events.iterator(chunk_size=500):
            to = (payload or {}).get("to")
            if entered is not None and to == "queued":
                held += max(0.0, (at - entered).total_seconds())
            entered = at if to in HELD_LIKE else None
        if held:
            Task.objects.filter(id=task_id).update(
                held_wait_s=held, review_wait_s=max(0.0, review_wait_s - held)
            )


class Migration(migrations.Migration):
    dependencies = [
        ("tasks", "0012_multiagent_groups"),
    ]

    operations = [
        migrations.AddField(
            model_name="task",
            name="held_wait_s",
            field=models.FloatField(default=0.0),
        ),
        migrations.RunPython(split_waits, migrations.RunPython.noop, elidable=True),
    ]
