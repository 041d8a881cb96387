"""A publisher restart is counted, and its stream purged, once, whichever way the reader finds
it; and a stream is no restarted one just because its reader died right after an apply.

Each test drives an ingest loop's steps from the test thread, so the order of events (what
the SUB socket holds, when a reply is read) is the test's and not the scheduler's.
"""

from collections.abc import Iterator

import pytest
import redis

from kvadmin.index import status
from kvadmin.index.streams import StreamId
from kvadmin.index.writer import Applier
from kvadmin.ingest.reader import IngestLoop
from tests.ingest.blocks import key, stored
from tests.ingest.conftest import spec_for
from tests.waiting import wait_until

STREAM = StreamId("vllm-0.default", 0)


@pytest.fixture
def stepped_loop(publisher, redis_url: str, redis_client) -> Iterator[IngestLoop]:
    """An ingest loop that owns the publisher's stream and runs only when the test steps it."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    loop = IngestLoop(
        Applier(client), lambda: [spec_for(publisher)], lambda: 0, worker_id="stepped"
    )
    loop.housekeeping()  # claims the stream, subscribes and replays (nothing yet)
    assert STREAM in loop.owned
    publisher.wait_for_subscribers()
    yield loop
    loop.close_session()
    loop.drop_all(release=True)
    client.close()


def _counters(client: redis.Redis) -> dict[str, str]:
    return status.read_statuses(client, [STREAM])[0].status


def _poll_until(loop: IngestLoop, done, what: str) -> None:
    """Step the loop (read, apply, read the replies) until `done()` holds."""
    wait_until(lambda: (loop.poll_once(timeout_ms=50), done())[1], what=what)


def test_a_restart_found_by_the_quiet_probe_is_counted_once(
    publisher, stepped_loop, redis_client
) -> None:
    publisher.publish([stored(1)])
    publisher.publish([stored(2)])
    stream = stepped_loop.owned[STREAM]
    _poll_until(stepped_loop, lambda: stream.last_live == 1, "the first run read live")
    publisher.restart()
    publisher.publish([stored(3)])  # seq 0 of the new run: on its way to the SUB socket

    stepped_loop.catch_up(stream)  # the quiet-stream probe: the replay shows the restart
    assert _counters(redis_client)["restarts"] == "1"
    # Then the same seq 0 arrives live: below the old run's last seq, yet no second restart.
    _poll_until(stepped_loop, lambda: stream.last_live == 0, "the new run's seq 0 read live")

    counters = _counters(redis_client)
    assert (counters["restarts"], counters["purges"]) == ("1", "1")
    assert redis_client.hget(key(1), "vllm-0.default") is None
    assert redis_client.hget(key(3), "vllm-0.default") is not None


def test_a_reader_dying_right_after_an_apply_leaves_no_restart_behind(
    publisher, stepped_loop, redis_client, start_loop
) -> None:
    publisher.publish([stored(1)])
    stream = stepped_loop.owned[STREAM]
    _poll_until(stepped_loop, lambda: status.last_digest(redis_client, STREAM), "seq 0 settled")
    publisher.publish([stored(2)])
    wait_until(lambda: stream.sub.poll(50), what="seq 1 on the SUB socket")
    stepped_loop.receive(stream, stream.sub.recv_multipart())
    stepped_loop.flush(stream)  # the apply is sent; its reply is not read
    wait_until(lambda: status.last_seq(redis_client, STREAM) == 1, what="seq 1 applied")
    stepped_loop.close_session()  # the reader dies (SIGKILL) before reading that reply
    stepped_loop.drop_all(release=True)  # its lease lapses

    start_loop([spec_for(publisher)], worker_id="next")
    wait_until(lambda: _counters(redis_client).get("owner") == "next", what="takeover")

    # The engine's replay of seq 1 is the batch applied: the stream goes on, untouched.
    assert "restarts" not in _counters(redis_client)
    assert redis_client.hget(key(1), "vllm-0.default") is not None
    assert redis_client.hget(key(2), "vllm-0.default") is not None
