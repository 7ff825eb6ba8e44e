from django.apps import AppConfig


class DashboardConfig(AppConfig):
    """The operator dashboard: overview, failure statistics, operations and audit pages,
    reading across tasks, checkpoints and review (never the other way round)."""

    name = "dashboard"
