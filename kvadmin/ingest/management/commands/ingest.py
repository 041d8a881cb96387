"""Run the ingest loops (one per index group) in the foreground, outside Celery (for debugging)."""

import signal

from django.core.management.base import BaseCommand

from kvadmin.ingest.runner import build_loops, run_loops


class Command(BaseCommand):
    help = "Consume the registered engines' KV event streams in the foreground."

    def handle(self, *args, **options) -> None:
        loops = build_loops()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: [loop.stop() for loop in loops])
        for thread in run_loops(loops):
            while thread.is_alive():
                thread.join(timeout=1)  # the main thread stays free for the signal handlers
