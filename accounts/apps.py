from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts"

    def ready(self) -> None:
        # Registers the single sign-on check (`manage.py check --deploy`).
        import accounts.checks  # noqa: F401
