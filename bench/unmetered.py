"""kvadmin's ASGI application with the decision metrics left out: `recorder.record_decision`
does nothing. bench/api.py serves it beside the real application, so that what the metrics
cost per decision (web and Redis CPU, latency) is measured rather than guessed. Never serve
it otherwise: the metrics are part of every decision (issue 22)."""

from kvadmin.asgi import application
from kvadmin.metrics import recorder

__all__ = ["application"]


def _not_recorded(target: object, decision: object) -> None:
    """The decision's metrics, left out."""


recorder.record_decision = _not_recorded
