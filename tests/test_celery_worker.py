"""Tasks run in a real worker process, not eagerly in the test."""

import os

from kvadmin.celery import app, ping


def test_tasks_are_not_eager() -> None:
    assert not app.conf.task_always_eager


def test_a_task_runs_in_a_real_worker(celery_worker) -> None:
    hostname = ping.delay().get(timeout=10)
    assert hostname.startswith("test-worker@")
    assert celery_worker.pid != os.getpid()
