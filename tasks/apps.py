from django.apps import AppConfig

from harness_base.config import harness_config


class TasksConfig(AppConfig):
    name = "tasks"
    verbose_name = "Tasks"

    def ready(self) -> None:
        # Fail start-up (web, workers, CLI) on a bad harness.yaml, naming the bad key.
        harness_config()
        # Registers the deploy checks (`manage.py check --deploy`).
        import tasks.checks  # noqa: F401
