from typing import Any

from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from kvadmin.engines.models import Engine
from kvadmin.engines.registry import bump_registry_version


@receiver(post_save, sender=Engine)
@receiver(post_delete, sender=Engine)
def _registry_changed(sender: type[Engine], instance: Engine, **kwargs: Any) -> None:
    transaction.on_commit(bump_registry_version)
