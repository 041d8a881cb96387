"""Log a failure the first time it happens, then again only once things went well in between
(and, if asked, its end once).

Loops that retry every second (the ingest reader, the weights refresh, metrics recording, the
demo traffic's outcome reports) would otherwise repeat one cause thousands of times a minute.
"""

import logging
import threading


class OncePerKind:
    """The kinds of failure currently going on, each logged when it starts (thread-safe)."""

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger
        self._failing: set[str] = set()
        self._lock = threading.Lock()

    def failed(self, kind: str, message: str = "", *args: object) -> None:
        """`kind` failed: log `message % args` (if any) unless it was failing already."""
        with self._lock:
            if kind in self._failing:
                return
            self._failing.add(kind)
        if message:
            self.logger.warning(message, *args)

    def failing(self, kind: str) -> bool:
        """Whether `kind` failed and has not gone well since."""
        with self._lock:
            return kind in self._failing

    def recovered(self, kind: str, message: str = "", *args: object) -> None:
        """`kind` went well: its next failure is logged again; `message % args` (if any) is
        logged (info) if it was failing."""
        with self._lock:
            if kind not in self._failing:
                return
            self._failing.discard(kind)
        if message:
            self.logger.info(message, *args)
