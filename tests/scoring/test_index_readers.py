"""Both index readers read the real Redis in one round trip and agree (compatibility.md 2.4,
5.8)."""

import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from scoring.hashing import block_hashes
from scoring.index import BaselineIndexReader, IndexReader, PrefixReader, score_request
from scoring.keys import block_value
from scoring.score import score_pods
from scoring.weights import TierWeights
from tests.index import MODEL, write_kthena_index
from tests.scoring.vectors import KTHENA, named

READERS = [
    pytest.param(BaselineIndexReader(), id="baseline"),
    pytest.param(IndexReader(), id="lua"),
]
WRITTEN_AT = 1703123456


class CountingConnection(redis.Connection):
    """A real connection that counts what it sends: one send per round trip."""

    sends = 0

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        CountingConnection.sends += 1
        super().send_packed_command(command, check_health)


@pytest.fixture
def counting_client(redis_url: str, redis_client: redis.Redis) -> Iterator[redis.Redis]:
    """A client of the (emptied) index database whose connections count their round trips."""
    client = redis.Redis.from_url(
        redis_url, decode_responses=True, connection_class=CountingConnection
    )
    yield client
    client.close()


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("table", named(KTHENA["weighted_tables"]))
def test_it_scores_kthenas_weighted_tables_from_redis(
    redis_client: redis.Redis, reader: PrefixReader, table: dict[str, Any]
) -> None:
    index = {
        int(block): {pod: block_value(WRITTEN_AT, medium) for pod, medium in pods.items()}
        for block, pods in table["owners"].items()
    }
    write_kthena_index(redis_client, index)
    walk = reader.walk(redis_client, MODEL, table["blocks"], None, {})
    expected = score_pods(
        table["blocks"], index, None, {}, TierWeights.from_config(table["weights"])
    )
    assert walk.runs == {pod.pod: pod.media_runs for pod in expected.pods}


@pytest.mark.parametrize("reader", READERS)
def test_it_reads_the_index_in_one_round_trip(
    counting_client: redis.Redis, reader: PrefixReader
) -> None:
    tokens = list(range(64))
    index = {block: {"a.ns": "5|GPU", "b.ns": "5"} for block in block_hashes(tokens)}
    write_kthena_index(counting_client, index)
    weights = TierWeights()
    score_request(counting_client, MODEL, tokens, None, {}, weights, reader=reader)  # loads Lua
    before = CountingConnection.sends
    result = score_request(counting_client, MODEL, tokens, None, {}, weights, reader=reader)
    assert CountingConnection.sends - before == 1
    assert result.scores == {"a.ns": 100, "b.ns": 100}


def test_the_lua_reader_reloads_its_script_after_a_script_flush(
    redis_client: redis.Redis,
) -> None:
    reader = IndexReader()
    write_kthena_index(redis_client, {1: {"a": "5|GPU"}})
    first = reader.walk(redis_client, MODEL, [1], None, {})
    redis_client.script_flush()
    assert reader.walk(redis_client, MODEL, [1], None, {}) == first


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("restricted", [True, False], ids=["candidates", "every pod"])
def test_it_reads_the_pods_starts_in_the_same_round_trip(
    counting_client: redis.Redis, reader: PrefixReader, restricted: bool
) -> None:
    """The earliest start of a pod's rank streams (unknown while one has none) and the one
    given: the later counts (compatibility.md 2.4 step 1)."""
    tokens = list(range(32))
    blocks = block_hashes(tokens)
    owners = {"a": "5|GPU", "b": "5|GPU", "c": "5|GPU", "d": "5|GPU"}
    write_kthena_index(counting_client, {b: owners for b in blocks})
    counting_client.hset("start:a|0", "started_at", 5)  # every rank of a started at 5 or later:
    counting_client.hset("start:a|1", "started_at", 6)  # its blocks are older
    counting_client.hset("start:b|0", "started_at", 6)  # b's rank 9 has no start: unknown
    counting_client.hset("start:d|0", "started_at", 4)  # d's rank 1 restarted alone at 5
    counting_client.hset("start:d|1", "started_at", 5)
    start_keys = {
        "a": ["start:a|0", "start:a|1"],
        "b": ["start:b|0", "start:b|9"],
        "c": [],
        "d": ["start:d|0", "start:d|1"],
    }
    candidates = set(owners) if restricted else None
    args = (MODEL, tokens, candidates, {"b": 3, "c": 5}, TierWeights())
    score_request(counting_client, *args, reader=reader, start_keys=start_keys)  # loads Lua
    before = CountingConnection.sends
    result = score_request(counting_client, *args, reader=reader, start_keys=start_keys)
    assert CountingConnection.sends - before == 1
    assert result.scores == {"b": 100, "d": 100}
    assert set(result.dropped_stale) == {"a", "c"}


@pytest.mark.parametrize("reader", READERS)
def test_it_scores_a_request_from_token_ids_with_timings(
    redis_client: redis.Redis, reader: PrefixReader
) -> None:
    tokens = list(range(40))  # blocks of 16, 16 and 8 tokens
    blocks = block_hashes(tokens)
    write_kthena_index(
        redis_client, {blocks[0]: {"a": "5|GPU", "old": "5"}, blocks[1]: {"a": "5|CPU"}}
    )
    weights = TierWeights()
    result = score_request(
        redis_client, MODEL, tokens, {"a", "old"}, {"old": 5}, weights, reader=reader
    )
    assert result.scores == {"a": 60}  # (1.0 + 0.8) / 3
    assert result.dropped_stale == ("old",)
    assert result.timings is not None and result.timings.total_ms > 0
    assert json.loads(json.dumps(result.to_dict()))["timings"]["read_ms"] > 0


@pytest.mark.parametrize("reader", READERS)
def test_a_request_without_tokens_scores_nobody(
    redis_client: redis.Redis, reader: PrefixReader
) -> None:
    result = score_request(redis_client, MODEL, [], None, {}, TierWeights(), reader=reader)
    assert (result.n_blocks, result.pods) == (0, ())


@pytest.mark.parametrize("reader", READERS)
def test_it_reads_only_the_requested_model(redis_client: redis.Redis, reader: PrefixReader) -> None:
    write_kthena_index(redis_client, {1: {"a": "5"}}, model="other/model")
    assert reader.walk(redis_client, MODEL, [1], None, {}).runs == {}


def test_the_readers_agree_when_more_pods_match_than_one_hmget_takes(
    redis_client: redis.Redis,
) -> None:
    """1,500 pods holding every block: the Lua walk reads them in chunks."""
    pods = [f"vllm-{i}.fleet" for i in range(1500)]
    index = {
        block: {pod: f"5|{'GPU' if i % 3 else 'CPU'}" for i, pod in enumerate(pods)}
        for block in (1, 2, 3)
    }
    index[3]["vllm-7.fleet"] = "4|GPU"
    write_kthena_index(redis_client, index)
    started = {"vllm-7.fleet": 4}
    lua = IndexReader().walk(redis_client, MODEL, [1, 2, 3], None, started)
    assert lua == BaselineIndexReader().walk(redis_client, MODEL, [1, 2, 3], None, started)
    assert lua.dropped_stale == {"vllm-7.fleet"}
    assert len(lua.runs) == 1500
