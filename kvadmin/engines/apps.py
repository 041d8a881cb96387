from django.apps import AppConfig


class EnginesConfig(AppConfig):
    name = "kvadmin.engines"

    def ready(self) -> None:
        from kvadmin.engines import (  # noqa: F401  (connect their signals and checks)
            index_groups,
            signals,
        )
