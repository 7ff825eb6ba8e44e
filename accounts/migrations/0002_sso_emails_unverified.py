"""Single sign-on stored the provider's email without checking `email_verified`, and people
are matched to Slack and email identities by it. An account made by a sign-in holds no email
until its next sign-in stores one the provider verifies (accounts.flows.oidc_login)."""

from django.conf import settings
from django.db import migrations


def forget_unverified_sso_emails(apps, schema_editor):
    user_model = apps.get_model(settings.AUTH_USER_MODEL)
    sso_users = apps.get_model("accounts", "SsoIdentity").objects.values("user_id")
    user_model.objects.filter(pk__in=sso_users).exclude(email="").update(email="")


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0001_initial"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RunPython(forget_unverified_sso_emails, migrations.RunPython.noop),
    ]
