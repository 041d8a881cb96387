"""Product knobs: `settings.KVADMIN` merged over CONFIG_DEFAULTS by one cached function,
reset when settings change (so `override_settings` works in tests).

Settings fills `KVADMIN` from KVADMIN_<NAME> environment variables; their text is converted
to the type of the default here.
"""

from functools import cache
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

CONFIG_DEFAULTS: dict[str, Any] = {
    "DEMO": True,  # make run starts a simulated fleet with traffic
    "INGEST": True,  # Celery workers consume KV event streams
    "LEASE_SECONDS": 10.0,  # a dead worker's streams are taken over after this
    "PURGE_ON_GAP": True,  # purge a stream's entries when events are lost for good
    # Largest batch accepted by POST /api/v1/events/<pod>; DATA_UPLOAD_MAX_MEMORY_SIZE caps it.
    "PUSH_MAX_BYTES": 2 * 1024 * 1024,
    "BLOCK_SIZE": 16,
    "MAX_BLOCKS": 128,
}


def _convert(name: str, value: Any) -> Any:
    default = CONFIG_DEFAULTS.get(name)
    if not isinstance(value, str) or default is None or isinstance(default, str):
        return value
    if isinstance(default, bool):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return type(default)(value)


@cache
def get_config() -> dict[str, Any]:
    overrides = getattr(settings, "KVADMIN", {})
    return CONFIG_DEFAULTS | {name: _convert(name, value) for name, value in overrides.items()}


def knob(name: str) -> Any:
    return get_config()[name]


@receiver(setting_changed)
def _reset_config(*, setting: str, **kwargs: Any) -> None:
    if setting == "KVADMIN":
        get_config.cache_clear()
