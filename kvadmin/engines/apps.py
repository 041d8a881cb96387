from django.apps import AppConfig


class EnginesConfig(AppConfig):
    name = "kvadmin.engines"

    def ready(self) -> None:
        from kvadmin.engines import signals  # noqa: F401  (connects registry change signals)
