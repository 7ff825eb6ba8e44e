from __future__ import annotations

from django.apps import AppConfig


class MultiagentConfig(AppConfig):
    name = "multiagent"
    verbose_name = "Multi-agent groups"
    default_auto_field = "django.db.models.BigAutoField"
