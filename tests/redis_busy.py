"""A real Redis held BUSY: a Lua script that spins on Redis's own clock, so that every other
client is answered BUSY (past `busy-reply-threshold`) until it ends."""

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import redis

from tests.waiting import wait_until

# Busy for ARGV[1] seconds of Redis's own clock.
BUSY_SCRIPT = """
local deadline = tonumber(redis.call('TIME')[1]) + tonumber(ARGV[1])
while tonumber(redis.call('TIME')[1]) < deadline do end
return 1
"""


@contextmanager
def held_busy(url: str, seconds: int) -> Iterator[None]:
    """Redis at `url` running a script for `seconds` (BUSY past 50 ms), answering BUSY when
    the block starts; on leaving, waits for the script to end."""
    client = redis.Redis.from_url(url, socket_timeout=None)
    client.config_set("busy-reply-threshold", 50)
    script = threading.Thread(target=client.eval, args=(BUSY_SCRIPT, 0, seconds), daemon=True)
    script.start()
    probe = redis.Redis.from_url(url, socket_timeout=5)

    def answers_busy() -> bool:
        try:
            probe.ping()
        except redis.ResponseError as error:
            return "BUSY" in str(error) or "busy" in str(error)
        return False

    wait_until(answers_busy, what="Redis answering BUSY")
    probe.close()
    try:
        yield
    finally:
        script.join()
        client.close()
