"""Tasks run in a real worker process, not eagerly in the test."""

import os
import threading

from kvadmin.celery import app, ping
from tests.waiting import patient, wait_until


def test_tasks_are_not_eager() -> None:
    assert not app.conf.task_always_eager


def test_a_task_runs_in_a_real_worker(celery_worker) -> None:
    hostname = ping.delay().get(timeout=patient(10))
    assert hostname.startswith("test-worker@")
    assert celery_worker.pid != os.getpid()


def test_the_worker_sends_task_events_a_monitor_sees(celery_worker) -> None:
    """What Flower or `celery events` reads: every task from sent to succeeded."""
    seen: dict[str, set[str]] = {}
    sent: list[str] = []

    def collect(event: dict) -> None:
        if "uuid" in event:
            seen.setdefault(event["uuid"], set()).add(event["type"])

    with app.connection_for_read() as connection:
        receiver = app.events.Receiver(connection, handlers={"*": collect})
        capture = threading.Thread(target=receiver.capture, kwargs={"wakeup": False})
        capture.start()
        try:

            def followed() -> bool:  # pings until one is sent after the receiver listens
                sent.append(ping.delay().id)
                sent_ok = [seen.get(task_id, set()) for task_id in sent]
                return any({"task-sent", "task-received", "task-succeeded"} <= s for s in sent_ok)

            wait_until(followed, timeout=30, interval=0.5, what="a ping's events")
        finally:
            receiver.should_stop = True
            capture.join(timeout=patient(10))
