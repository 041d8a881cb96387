"""`make run`'s web server runs one process per core unless told otherwise."""

import os

from kvadmin.web_server import worker_options


def test_by_default_one_web_process_per_core() -> None:
    assert worker_options(["--port", "8000"], 0) == ["--workers", str(os.cpu_count())]


def test_the_knob_sets_the_number() -> None:
    assert worker_options([], 3) == ["--workers", "3"]


def test_the_command_line_wins() -> None:
    assert worker_options(["--workers", "1"], 3) == []
    assert worker_options(["--workers=1"], 0) == []
