from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save


class ApiConfig(AppConfig):
    name = "kvadmin.api"
    verbose_name = "API"

    def ready(self) -> None:
        from kvadmin.api.models import ApiToken
        from kvadmin.engines.models import Engine

        # The lean path's per-process copy of tokens and engines (kvadmin/api/process_cache.py).
        for model in (ApiToken, Engine):
            for signal in (post_save, post_delete):
                signal.connect(_changed, sender=model, dispatch_uid=f"api-cache-{model.__name__}")


def _changed(**kwargs: object) -> None:
    from kvadmin.api.process_cache import changed

    changed()
