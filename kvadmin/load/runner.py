"""Running the load scraper inside a Celery worker, as a bootstep beside the ingest loop."""

import threading

from celery import bootsteps
from django.db import close_old_connections

from kvadmin.conf import knob
from kvadmin.load.scraper import LoadScraper, ScrapeSettings, Target


def load_targets() -> list[Target]:
    """Every enabled engine with an HTTP base URL."""
    from kvadmin.engines.models import Engine

    close_old_connections()
    try:
        engines = Engine.objects.filter(enabled=True).exclude(http_base_url="")
        return [Target(e.pod, e.kind, e.http_base_url) for e in engines]
    finally:
        close_old_connections()


def build_scraper(worker_id: str) -> LoadScraper:
    from kvadmin.engines.registry import registry_version
    from kvadmin.redis_clients import index_client

    return LoadScraper(
        # Short timeouts: a stalled Redis fails a round fast, and the next period tries again.
        client=index_client(),
        load_targets=load_targets,
        registry_version=registry_version,
        worker_id=worker_id,
        settings=ScrapeSettings(
            period=knob("LOAD_SCRAPE_PERIOD_SECONDS"),
            timeout=knob("LOAD_SCRAPE_TIMEOUT_SECONDS"),
            max_bytes=knob("LOAD_SCRAPE_MAX_BYTES"),
            threads=knob("LOAD_SCRAPE_THREADS"),
            ttl=knob("LOAD_TTL_SECONDS"),
            sample_every=knob("LOAD_FIT_SAMPLE_SECONDS"),
            samples=knob("LOAD_FIT_SAMPLES"),
        ),
    )


class LoadBootstep(bootsteps.StartStopStep):
    """Every `celery -A kvadmin worker` scrapes engine load unless started with
    `--without-load` (or KVADMIN_LOAD_SCRAPE=0)."""

    requires = {"celery.worker.components:Pool"}

    def __init__(self, worker, without_load: bool = False, **options) -> None:
        super().__init__(worker, **options)
        self.enabled = knob("LOAD_SCRAPE") and not without_load
        self.scraper: LoadScraper | None = None
        self.thread: threading.Thread | None = None

    def start(self, worker) -> None:
        self.scraper = build_scraper(worker.hostname)
        self.thread = threading.Thread(target=self.scraper.run, name="kvadmin-load", daemon=True)
        self.thread.start()

    def stop(self, worker) -> None:
        if self.scraper and self.thread:
            self.scraper.stop()
            self.thread.join(timeout=2 * knob("LOAD_SCRAPE_PERIOD_SECONDS") + 1)
