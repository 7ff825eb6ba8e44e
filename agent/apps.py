from django.apps import AppConfig


class AgentConfig(AppConfig):
    """The agent loop and what runs it: RQ jobs and worker, model adapters, tool
    implementations, the sweeper. Above every other app; nothing imports it
    (docs/architecture.md)."""

    name = "agent"
    verbose_name = "Agent loop"
