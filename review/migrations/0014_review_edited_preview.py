from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("review", "0013_review_daily"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="reviewrequest",
            name="edited_preview",
            field=models.TextField(blank=True, default=""),
        ),
        migrations.AddField(
            model_name="reviewrequest",
            name="edited_by",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=models.deletion.SET_NULL,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddField(
            model_name="reviewrequest",
            name="edited_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
