from django.apps import AppConfig


class RoutingConfig(AppConfig):
    name = "kvadmin.routing"

    def ready(self) -> None:
        from kvadmin.routing import signals  # noqa: F401  (re-arms tokenizer guards)
