"""Routine access lines stay out of the log; errors and pages never do."""

import logging

import pytest

from kvadmin.routine_logs import RoutineRequests


def access_line(path: str, status: int) -> logging.LogRecord:
    """A record as uvicorn's access logger makes it."""
    args = ("127.0.0.1:5000", "POST", path, "1.1", status)
    return logging.LogRecord(
        "uvicorn.access", logging.INFO, "", 0, '%s - "%s %s HTTP/%s" %d', args, None
    )


@pytest.mark.parametrize("path", ["/api/v1/score", "/api/v1/events/vllm-0.default", "/healthz"])
def test_successful_routine_calls_are_left_out(path: str) -> None:
    assert not RoutineRequests().filter(access_line(path, 200))


@pytest.mark.parametrize(
    ("path", "status"), [("/api/v1/score", 500), ("/api/v1/score", 403), ("/weights/", 200)]
)
def test_errors_and_pages_are_kept(path: str, status: int) -> None:
    assert RoutineRequests().filter(access_line(path, status))
