from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "kvadmin.dashboard"

    def ready(self) -> None:
        from kvadmin.dashboard import first_admin  # noqa: F401  (connects its signal)
