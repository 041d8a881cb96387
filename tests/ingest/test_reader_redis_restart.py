"""Redis restarting under a running reader: it backs off, reconnects and resumes from the last
applied seq; batches published meanwhile come back through replay, none is applied twice."""

from pathlib import Path

import redis

from kvadmin.index import status
from kvadmin.index.streams import StreamId
from kvadmin.redis_server import RedisServer
from tests.ingest.blocks import key, stored
from tests.ingest.conftest import spec_for
from tests.waiting import wait_until

STREAM = StreamId("vllm-0.default", 0)


def test_it_resumes_after_a_redis_restart(publisher, start_loop, tmp_path: Path) -> None:
    server = RedisServer(data_dir=tmp_path).start()  # persistent: the index survives the restart
    client = redis.Redis.from_url(server.url, decode_responses=True)
    try:
        start_loop([spec_for(publisher)], url=server.url)
        wait_until(lambda: status.read_statuses(client, [STREAM])[0].connected, what="connect")
        publisher.wait_for_subscribers()
        first = publisher.publish([stored(1)])
        wait_until(lambda: status.last_seq(client, STREAM) == first, what="first batch applied")

        server.stop()
        published_while_down = [publisher.publish([stored(n)]) for n in (2, 3, 4)]
        server.start()

        wait_until(
            lambda: status.last_seq(client, STREAM) == published_while_down[-1],
            timeout=30,
            what="the reader to resume",
        )
        assert all(client.hget(key(n), "vllm-0.default") for n in (1, 2, 3, 4))
        assert status.read_statuses(client, [STREAM])[0].status["batches"] == "4", (
            "each batch applied exactly once"
        )
    finally:
        client.close()
        server.stop()
