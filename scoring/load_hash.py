"""`LoadHash`: the one typed view of a pod's load hash (`keys.load_key`, written by
kvadmin.load.scraper) that the pages, metrics and engine health read, with the staleness rule
(LOAD_STALE_SECONDS) in one place. Here, below every kvadmin package that reads it (kvadmin.load
itself imports engines and metrics). Routing reads the same LOAD_FIELDS inside its one script
reply and prices them under its own resync rule (scoring.route_state).
"""

from dataclasses import dataclass
from typing import Any

from redis.client import Pipeline

from scoring.keys import LOAD_FIELDS, load_key


@dataclass(frozen=True, slots=True)
class LoadHash:
    """The last scrape's LOAD_FIELDS as text (absent: None); untrusted, parsed on reading."""

    running_text: str | None
    waiting_text: str | None
    kv_usage_text: str | None
    scraped_at_text: str | None

    @property
    def running(self) -> int | None:
        return _whole(self.running_text)

    @property
    def waiting(self) -> int | None:
        return _whole(self.waiting_text)

    @property
    def kv_usage(self) -> float | None:
        return _number(self.kv_usage_text)

    @property
    def scraped_at(self) -> float | None:
        """When the last good scrape was written (unix seconds), None without one."""
        return _number(self.scraped_at_text)

    def age_seconds(self, now: float) -> float | None:
        """How old the last scrape is at `now` (0 for one from the future), None without one."""
        at = self.scraped_at
        return None if at is None else max(0.0, now - at)

    def stale(self, now: float, stale_seconds: float) -> bool:
        """No load, or older than `stale_seconds` (LOAD_STALE_SECONDS): nothing can trust it."""
        age = self.age_seconds(now)
        return age is None or age > stale_seconds


def queue_read(pipe: Pipeline, pod: str) -> None:
    """Queue the one reply `from_reply` reads."""
    pipe.hmget(load_key(pod), LOAD_FIELDS)


def from_reply(reply: Any) -> LoadHash:
    return LoadHash(*(_text(value) for value in reply))


def _text(value: str | bytes | None) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None


def _whole(text: str | None) -> int | None:
    number = _number(text)
    return None if number is None else int(number)
