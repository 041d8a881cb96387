"""Product knobs: `settings.KVADMIN` merged over defaults, cached, reset when settings change."""

from functools import cache
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

CONFIG_DEFAULTS: dict[str, Any] = {
    "BLOCK_SIZE": 16,
    "MAX_BLOCKS": 128,
    "LEASE_SECONDS": 10.0,
    "DEMO": True,
}


@cache
def get_config() -> dict[str, Any]:
    return CONFIG_DEFAULTS | getattr(settings, "KVADMIN", {})


def knob(name: str) -> Any:
    return get_config()[name]


@receiver(setting_changed)
def _reset_config(*, setting: str, **kwargs: Any) -> None:
    if setting == "KVADMIN":
        get_config.cache_clear()
