"""One failure, logged once while it lasts, and again after a recovery."""

import logging

from kvadmin.log_once import OncePerKind


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_a_failure_is_logged_when_it_starts_and_again_after_a_recovery() -> None:
    # A logger of the test's own, with its own handler: the session's logging configuration
    # (Django's, Celery's) may have disabled or redirected loggers created before it.
    log = logging.getLogger("tests.log_once.isolated")
    log.disabled, log.propagate = False, False
    log.setLevel(logging.INFO)
    kept = _Kept()
    log.addHandler(kept)
    try:
        failures = OncePerKind(log)
        for attempt in range(3):
            failures.failed("redis", "Redis failed (%s)", attempt)
        failures.failed("bug")  # failing, with nothing to say
        failures.failed("database", "no database")
        assert failures.failing("redis") and failures.failing("bug")
        for _ in range(3):
            failures.recovered("redis", "Redis is back")
        assert not failures.failing("redis")
        failures.failed("redis", "Redis failed (%s)", "again")
        failures.recovered("database")  # nothing to say
        failures.recovered("database", "the database is back")  # not failing: not logged
    finally:
        log.removeHandler(kept)
    assert kept.messages == [
        "Redis failed (0)",
        "no database",
        "Redis is back",
        "Redis failed (again)",
    ]
