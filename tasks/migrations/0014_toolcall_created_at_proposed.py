"""ToolCall.created_at is when the model proposed the call (set when the row is built), not
when the row was first written: a call written only with its outcome had finished before it
was "created". Rows written that way get their first known time back."""

import django.utils.timezone
from django.db import migrations, models
from django.db.models import F


def first_known_time(apps, schema_editor):
    ToolCall = apps.get_model("tasks", "ToolCall")
    ToolCall.objects.filter(started_at__lt=F("created_at")).update(created_at=F("started_at"))
    ToolCall.objects.filter(finished_at__lt=F("created_at")).update(created_at=F("finished_at"))


class Migration(migrations.Migration):
    dependencies = [
        ("tasks", "0013_task_held_wait_s"),
    ]

    operations = [
        migrations.AlterField(
            model_name="toolcall",
            name="created_at",
            field=models.DateTimeField(default=django.utils.timezone.now),
        ),
        migrations.RunPython(first_known_time, migrations.RunPython.noop, elidable=True),
    ]
