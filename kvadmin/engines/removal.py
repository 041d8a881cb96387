"""Removing an engine: the registry row, every index entry of the pod and its streams' status."""

from django.db import transaction

from kvadmin.engines.models import Engine
from kvadmin.index.purge import forget_pod


def remove_engine(pod: str) -> int:
    """Delete the engine and purge its index entries and stream status; returns how many
    block entries went."""
    with transaction.atomic():
        engine = Engine.objects.get(pod=pod)
        engine.delete()
    return forget_pod(pod, engine.dp_size)
