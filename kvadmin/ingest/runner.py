"""Running the ingest loops inside a process: a Celery worker bootstep, or `manage.py ingest`.

One loop per index group (`kvadmin.index.groups`), each on its own thread and its group's
primary: it reads the streams of the models its group holds, and keeps their leases and
status beside their index. A stream carries one model's events (its engine's served model),
so each stream has one loop.
"""

import logging
import threading

from celery import bootsteps

from kvadmin.conf import knob
from kvadmin.index.groups import IndexGroup, group_of, index_groups
from kvadmin.ingest.reader import IngestLoop
from kvadmin.ingest.streams import StreamSpec

log = logging.getLogger(__name__)


def build_loop(worker_id: str | None = None, group: IndexGroup | None = None) -> IngestLoop:
    """The loop of `group` (the default group when None)."""
    from kvadmin.engines.registry import registry_version
    from kvadmin.ingest.registered import load_streams
    from kvadmin.weights.active import active_applier

    group = group or index_groups()[-1]

    def group_streams() -> list[StreamSpec]:
        return [spec for spec in load_streams() if group_of(spec.model) == group]

    return IngestLoop(
        applier=active_applier(group.ingest_client()),
        load_streams=group_streams,
        registry_version=registry_version,
        lease_seconds=knob("LEASE_SECONDS"),
        purge_on_gap=knob("PURGE_ON_GAP"),
        worker_id=worker_id,
    )


def build_loops(worker_id: str | None = None) -> list[IngestLoop]:
    """A loop per index group."""
    return [build_loop(worker_id, group) for group in index_groups()]


def run_loops(loops: list[IngestLoop]) -> list[threading.Thread]:
    """Start each loop on a thread of its own (daemons: a stopped process does not wait)."""
    threads = [
        threading.Thread(target=loop.run, name=f"kvadmin-ingest-{number}", daemon=True)
        for number, loop in enumerate(loops)
    ]
    for thread in threads:
        thread.start()
    return threads


class IngestBootstep(bootsteps.StartStopStep):
    """Every `celery -A kvadmin worker` consumes KV event streams unless started with
    `--without-ingest` (or KVADMIN_INGEST=0)."""

    requires = {"celery.worker.components:Pool"}

    def __init__(self, worker, without_ingest: bool = False, **options) -> None:
        super().__init__(worker, **options)
        self.enabled = knob("INGEST") and not without_ingest
        self.loops: list[IngestLoop] = []
        self.threads: list[threading.Thread] = []

    def start(self, worker) -> None:
        self.loops = build_loops(worker_id=worker.hostname)
        self.threads = run_loops(self.loops)

    def stop(self, worker) -> None:
        for loop in self.loops:
            loop.stop()
        for thread in self.threads:
            thread.join(timeout=knob("LEASE_SECONDS"))
