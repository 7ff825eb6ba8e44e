from django.db import migrations, models


def reroll(apps, schema_editor):
    """Every rolled hour is rolled again by the sweep (stale), which counts its breaches."""
    apps.get_model("review", "ReviewRolledHour").objects.update(stale=True)


class Migration(migrations.Migration):

    dependencies = [
        ("review", "0018_versions"),
    ]

    operations = [
        migrations.AddField(
            model_name="reviewdaily",
            name="breached",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="reviewhourly",
            name="breached",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.RunPython(reroll, migrations.RunPython.noop),
    ]
