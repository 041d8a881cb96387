"""A request-id search reads a bounded part of the decision log, the newest REQUEST_SCAN
entries, and says so when the log holds more: a miss no longer reads the whole log."""

import json

import pytest
import redis

from kvadmin.search import lookup
from scoring.keys import DECISIONS_KEY

pytestmark = pytest.mark.django_db


def _log(client: redis.Redis, entries: int) -> None:
    pipe = client.pipeline(transaction=False)
    for n in range(entries):
        pipe.xadd(DECISIONS_KEY, {"d": json.dumps({"request_id": f"filler-{n}"})})
    pipe.execute()


def test_a_miss_in_a_long_log_reads_only_the_newest_and_says_so(redis_client) -> None:
    redis_client.xadd(DECISIONS_KEY, {"d": json.dumps({"request_id": "the-oldest"})})
    _log(redis_client, lookup.REQUEST_SCAN + 500)
    read: list[int] = []
    real = redis_client.xrevrange

    def counted(*args, **kwargs):
        found = real(*args, **kwargs)
        read.append(len(found))
        return found

    redis_client.xrevrange = counted  # the client's own replies, counted
    result = lookup.search(redis_client, "the-oldest")
    assert result.matches == []
    assert f"a request id (the newest {lookup.REQUEST_SCAN:,})" in result.tried
    assert sum(read) <= lookup.REQUEST_SCAN + 1


def test_a_short_log_is_read_whole(redis_client) -> None:
    _log(redis_client, 10)
    assert "a request id" in lookup.search(redis_client, "nowhere").tried
