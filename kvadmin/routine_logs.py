"""Routine lines kept out of the log unless KVADMIN_QUIET_LOGS is off, and handled answers
logged once, at the level they deserve.

A running stack logs a line per beat tick, two per task and one per HTTP request: with the demo
fleet's traffic (a score and an outcome per request) and a dashboard polling its tiles that is
hundreds a minute, and what an operator needs to see (errors, a stream that lost events, a
worker taking over, the admin password box of `make run`) scrolls away in them.

What is routine is said by kind, not by a list of endpoints that the next one would miss:
every success (below 400) of a read (GET, HEAD, OPTIONS: pages, htmx polls, exports) and of a
machine call (the API, probes, /metrics, static files). What stays: every 4xx and 5xx, and a
form a person posts to a page (a login, weights saved, an engine edited).

A 503 is an answer kvadmin gives on purpose (an outage, backpressure, engines that do not
answer), not an error: whoever answers it logs one WARNING, and Django's request logger, which
logs every 5xx as an ERROR, logs it as a WARNING when nobody did (`HandledUnavailable`).
"""

import logging

from kvadmin.conf import knob

# Beat's "Sending due task", the worker's "Task ... received" and "... succeeded in".
CELERY_ROUTINE = ("celery.beat", "celery.worker.strategy", "celery.app.trace")

MACHINE_PATHS = ("/api/", "/healthz", "/readyz", "/metrics", "/static/")
"""Called by gateways, engines, probes and scrapers many times a second or minute."""
READS = frozenset({"GET", "HEAD", "OPTIONS"})


def routine(method: str, path: str, status: int) -> bool:
    return status < 400 and (method in READS or path.startswith(MACHINE_PATHS))


class RoutineRequests(logging.Filter):
    """Drops uvicorn's access lines of routine successes; errors always pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if not isinstance(args, tuple) or len(args) != 5:
            return True
        _client, method, path, _version, status = args
        return not routine(str(method), str(path), int(status))


class HandledUnavailable(logging.Filter):
    """django.request: a 503 is logged as a WARNING, not an ERROR (the Redis outage middleware
    logs its own and marks the response logged, so Django adds nothing)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", None) == 503 and record.levelno > logging.WARNING:
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def quiet_celery() -> None:
    if knob("QUIET_LOGS"):
        for name in CELERY_ROUTINE:
            logging.getLogger(name).setLevel(logging.WARNING)


def quiet_access_log() -> None:
    if knob("QUIET_LOGS"):
        logging.getLogger("uvicorn.access").addFilter(RoutineRequests())
