"""Routine lines kept out of the log unless KVADMIN_QUIET_LOGS is off.

A running stack logs a line per beat tick, two per task and one per HTTP request: with the demo
fleet's traffic that is hundreds a minute, and what an operator needs to see (errors, a stream
that lost events, a worker taking over) drowns in them.
"""

import logging

from kvadmin.conf import knob

# Beat's "Sending due task", the worker's "Task ... received" and "... succeeded in".
CELERY_ROUTINE = ("celery.beat", "celery.worker.strategy", "celery.app.trace")

# Called by gateways, engines, probes and scrapers many times a second or minute.
ROUTINE_PATHS = ("/api/v1/score", "/api/v1/events/", "/healthz", "/readyz", "/metrics", "/static/")


class RoutineRequests(logging.Filter):
    """Drops uvicorn's access lines of successful routine calls; errors always pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if not isinstance(args, tuple) or len(args) != 5:
            return True
        _client, _method, path, _version, status = args
        return int(status) >= 400 or not str(path).startswith(ROUTINE_PATHS)


def quiet_celery() -> None:
    if knob("QUIET_LOGS"):
        for name in CELERY_ROUTINE:
            logging.getLogger(name).setLevel(logging.WARNING)


def quiet_access_log() -> None:
    if knob("QUIET_LOGS"):
        logging.getLogger("uvicorn.access").addFilter(RoutineRequests())
