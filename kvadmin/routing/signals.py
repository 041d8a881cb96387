"""Routing's side of engine registry changes (the registry itself knows nothing of routing)."""

import logging
from typing import Any

from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from redis import RedisError

from kvadmin.engines.models import Engine
from kvadmin.routing import registry, tokenizer_guard

log = logging.getLogger(__name__)


@receiver(post_save, sender=Engine)
def _tokenizer_rearmed(sender: type[Engine], instance: Engine, **kwargs: Any) -> None:
    """Saving an engine that names a tokenizer re-arms its model's consistency guard."""
    if instance.tokenizer:
        transaction.on_commit(lambda: _reset_guard(instance.model))


def _reset_guard(model: str) -> None:
    try:
        tokenizer_guard.reset(model)
    except RedisError as error:
        log.warning("the tokenizer guard of %s was not reset: %s", model, error)


@receiver(post_save, sender=Engine)
@receiver(post_delete, sender=Engine)
def _registry_changed(sender: type[Engine], **kwargs: Any) -> None:
    """Scoring in this process sees the change at once (`routing.registry`); the others when
    the version it shares with the API's copy moves (kvadmin/api/apps.py announces it)."""
    registry.forget()
