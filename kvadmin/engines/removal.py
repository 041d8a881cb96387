"""Removing an engine: the registry row and every index entry of the pod, nothing else."""

from django.db import transaction

from kvadmin.engines.models import Engine
from kvadmin.ingest.index import purge_pod


def remove_engine(pod: str) -> int:
    """Delete the engine and purge its index entries; returns how many block entries went."""
    with transaction.atomic():
        Engine.objects.get(pod=pod).delete()
    return purge_pod(pod)
