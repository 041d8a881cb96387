"""A real Redis held BUSY: a Lua script that spins on Redis's own clock, so that every other
client is answered BUSY (past `busy-reply-threshold`) until it ends.

The script runs for as long as the test's block does and is killed when the block ends
(SCRIPT KILL: it writes nothing), rather than running for a fixed time: what a test does
while Redis is busy must not have to fit in a window that a loaded machine can overrun, and a
quick test does not sit out the rest of the window.
"""

import contextlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import redis

from tests.waiting import WAIT_SECONDS, patient, wait_until

# Busy for ARGV[1] seconds of Redis's own clock, unless killed first.
BUSY_SCRIPT = """
local deadline = tonumber(redis.call('TIME')[1]) + tonumber(ARGV[1])
while tonumber(redis.call('TIME')[1]) < deadline do end
return 1
"""
BUSY_THRESHOLD_MS = 50


def _answers_busy(url: str) -> bool:
    probe = redis.Redis.from_url(url, socket_timeout=patient(5))
    try:
        probe.ping()
    except redis.ResponseError as error:  # "BUSY ..." (its class is kvadmin's to give)
        return "busy running a script" in str(error).lower()
    finally:
        probe.close()
    return False


def _killed(url: str) -> bool:
    killer = redis.Redis.from_url(url, socket_timeout=patient(5))
    try:
        killer.script_kill()
    except redis.ResponseError as error:
        if "NOTBUSY" not in str(error).upper():
            raise
    finally:
        killer.close()
    return not _answers_busy(url)


@contextmanager
def held_busy(url: str, longest: float = 2 * WAIT_SECONDS) -> Iterator[None]:
    """Redis at `url` running a script (BUSY past 50 ms) from the start of the block, which it
    enters once Redis answers BUSY, to its end (or `longest` seconds, scaled, if the block
    outlasts that). The server's busy threshold is put back afterwards: the session's Redis
    is every later test's too."""
    client = redis.Redis.from_url(url, socket_timeout=None)
    threshold = client.config_get("busy-reply-threshold")["busy-reply-threshold"]
    client.config_set("busy-reply-threshold", BUSY_THRESHOLD_MS)

    def spin() -> None:
        with contextlib.suppress(redis.ResponseError):  # killed at the end of the block
            client.eval(BUSY_SCRIPT, 0, int(patient(longest)))

    script = threading.Thread(target=spin, name="redis-held-busy")
    script.start()
    try:
        wait_until(lambda: _answers_busy(url), what="Redis answering BUSY")
        yield
    finally:
        wait_until(lambda: _killed(url), what="the busy script to be killed")
        script.join(timeout=patient(WAIT_SECONDS))
        assert not script.is_alive(), "the busy script's client did not return"
        client.config_set("busy-reply-threshold", threshold)
        client.close()
