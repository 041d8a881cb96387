"""Run the ingest loop in the foreground, outside Celery (for debugging)."""

import signal

from django.core.management.base import BaseCommand

from kvadmin.ingest.runner import build_loop


class Command(BaseCommand):
    help = "Consume the registered engines' KV event streams in the foreground."

    def handle(self, *args, **options) -> None:
        loop = build_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: loop.stop())
        loop.run()
