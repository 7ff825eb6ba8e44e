from django.apps import AppConfig


class CheckpointsConfig(AppConfig):
    name = "checkpoints"
    verbose_name = "Checkpoints"

    def ready(self) -> None:
        from checkpoints import receivers
        from tasks import signals

        # A review's `restart` reaches recovery only through this (tasks.signals).
        signals.restart_requested.connect(
            receivers.on_restart_requested, dispatch_uid="checkpoints.restart_requested"
        )
