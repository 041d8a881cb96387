"""Running the ingest loop inside a process: a Celery worker bootstep, or `manage.py ingest`."""

import logging
import threading

from celery import bootsteps

from kvadmin.conf import knob
from kvadmin.ingest.reader import IngestLoop
from kvadmin.redis_clients import ingest_client

log = logging.getLogger(__name__)


def build_loop(worker_id: str | None = None) -> IngestLoop:
    from kvadmin.engines.registry import registry_version
    from kvadmin.ingest.registered import load_streams
    from kvadmin.weights.active import active_applier

    return IngestLoop(
        applier=active_applier(ingest_client()),
        load_streams=load_streams,
        registry_version=registry_version,
        lease_seconds=knob("LEASE_SECONDS"),
        purge_on_gap=knob("PURGE_ON_GAP"),
        worker_id=worker_id,
    )


class IngestBootstep(bootsteps.StartStopStep):
    """Every `celery -A kvadmin worker` consumes KV event streams unless started with
    `--without-ingest` (or KVADMIN_INGEST=0)."""

    requires = {"celery.worker.components:Pool"}

    def __init__(self, worker, without_ingest: bool = False, **options) -> None:
        super().__init__(worker, **options)
        self.enabled = knob("INGEST") and not without_ingest
        self.loop: IngestLoop | None = None
        self.thread: threading.Thread | None = None

    def start(self, worker) -> None:
        self.loop = build_loop(worker_id=worker.hostname)
        self.thread = threading.Thread(target=self.loop.run, name="kvadmin-ingest", daemon=True)
        self.thread.start()

    def stop(self, worker) -> None:
        if self.loop and self.thread:
            self.loop.stop()
            self.thread.join(timeout=knob("LEASE_SECONDS"))
