"""The embedded Redis's append-only file does not grow across restarts: hours of traffic
overwrite the same keys, and each start of the stack rewrites the file to what the data
needs."""

import redis

from kvadmin.redis_server import RedisServer, compact
from tests.waiting import wait_until


def test_a_start_rewrites_the_file_to_the_size_of_the_data(tmp_path) -> None:
    data = tmp_path / "redis"

    def file_size() -> int:
        return sum(path.stat().st_size for path in data.rglob("appendonly*"))

    with RedisServer(data_dir=data) as server:
        client = redis.Redis(port=server.port)
        for _ in range(20):
            with client.pipeline(transaction=False) as pipe:
                for n in range(1000):
                    pipe.set(f"tile:{n}", b"x" * 500)  # the same keys, over and over
                pipe.execute()
        grown = file_size()
        assert grown > 8 * 2**20
        compact(server.url)
        wait_until(lambda: file_size() < grown / 10, timeout=30, what="the file to be rewritten")
        client.close()
