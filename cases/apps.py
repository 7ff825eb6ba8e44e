from __future__ import annotations

from django.apps import AppConfig


class CasesConfig(AppConfig):
    name = "cases"
    verbose_name = "Saved cases and replays"
    default_auto_field = "django.db.models.BigAutoField"
