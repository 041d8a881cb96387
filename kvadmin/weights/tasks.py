from typing import Any

from celery import shared_task

from kvadmin.weights.active import active_weights


@shared_task(name="kvadmin.weights.in_use")
def weights_in_use() -> dict[str, Any]:
    """The tier weights this worker scores and indexes with: shows that a saved version
    reached the workers (operators and tests ask it)."""
    active = active_weights()
    return {
        "version": active.version,
        "weights": dict(active.weights.weights),
        "fallback": active.weights.fallback,
    }
