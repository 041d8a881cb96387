"""One failure, logged once while it lasts, and again after a recovery."""

import logging

from kvadmin.log_once import OncePerKind

log = logging.getLogger("tests.log_once")


def test_a_failure_is_logged_when_it_starts_and_again_after_a_recovery(caplog) -> None:
    failures = OncePerKind(log)
    with caplog.at_level(logging.WARNING, logger=log.name):
        for attempt in range(3):
            failures.failed("redis", "Redis failed (%s)", attempt)
        failures.failed("bug")  # counted as failing, nothing to say
        failures.failed("database", "no database")
        failures.recovered("redis")
        failures.failed("redis", "Redis failed (%s)", "again")
    assert [r.getMessage() for r in caplog.records] == [
        "Redis failed (0)",
        "no database",
        "Redis failed (again)",
    ]
