"""An admin may create a person's single sign-on identity before their first sign-in
(/people/): until then it has no last sign-in."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0002_sso_emails_unverified"),
    ]

    operations = [
        migrations.AlterField(
            model_name="ssoidentity",
            name="last_login_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
