"""A real Redis held BUSY: a Lua script that spins until it is killed, so that every other
client is answered BUSY (past `busy-reply-threshold`) for as long as a test needs it, however
slowly the test gets there (a script of fixed length could end before a starved test looked)."""

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import redis

from tests.waiting import patient, wait_until

# Spins for at most ARGV[1] seconds of Redis's own clock (a bound, should nobody kill it);
# it writes nothing, so SCRIPT KILL ends it.
BUSY_SCRIPT = """
local deadline = tonumber(redis.call('TIME')[1]) + tonumber(ARGV[1])
while tonumber(redis.call('TIME')[1]) < deadline do end
return 1
"""


def _answers_busy(url: str) -> bool:
    probe = redis.Redis.from_url(url, socket_timeout=patient(5))
    try:
        probe.ping()
    except redis.ResponseError as error:
        return "BUSY" in str(error).upper()
    finally:
        probe.close()
    return False


@contextmanager
def held_busy(url: str) -> Iterator[None]:
    """Redis at `url` running a script (BUSY past 50 ms) from when the block starts until it
    ends; on leaving, the script is killed and Redis answers again, and its busy threshold is
    put back (the session's Redis is every later test's too: at 50 ms, a long script of theirs
    would answer BUSY to their other clients)."""
    client = redis.Redis.from_url(url, socket_timeout=None)
    threshold = client.config_get("busy-reply-threshold")["busy-reply-threshold"]
    client.config_set("busy-reply-threshold", 50)

    def spin() -> None:
        try:
            client.eval(BUSY_SCRIPT, 0, int(patient(120)))
        except redis.ResponseError as error:  # killed, as intended
            assert "killed" in str(error).lower(), error

    script = threading.Thread(target=spin, daemon=True)
    script.start()
    try:
        wait_until(lambda: _answers_busy(url), what="Redis answering BUSY")
        yield
    finally:
        killer = redis.Redis.from_url(url, socket_timeout=patient(5))
        wait_until(lambda: _killed(killer) or not script.is_alive(), what="the script killed")
        script.join(timeout=patient(10))
        killer.close()
        client.config_set("busy-reply-threshold", threshold)
        client.close()


def _killed(killer: redis.Redis) -> bool:
    try:
        killer.script_kill()
    except redis.ResponseError as error:  # NOTBUSY: not started yet, or already over
        if "NOTBUSY" not in str(error).upper():
            raise
        return False
    return True
