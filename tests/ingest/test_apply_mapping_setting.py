"""KVADMIN_SIDECAR_MAPPING_KEYS (compatibility.md 2.3): off (the default), kvadmin writes no
kthena mapping keys and needs none, since placeholders of another rank resolve through that
rank's engine blocks; the keys left from when it was on go with garbage collection and purges;
switched on, a replay of the engines' caches writes them again."""

import pytest
import redis

from kvadmin.index.events import BlockStored, Event, EventBatch
from kvadmin.index.writer import Applier
from scoring.hashing import hash_block
from scoring.keys import block_key, engine_hash_key
from tests.engine_blocks import stream_blocks
from tests.index import MODEL

POD = "p.ns"
TOKENS = tuple(range(16))
STD = str(hash_block(TOKENS))
MAPPING = engine_hash_key("vllm", POD, "7")


class _Pod:
    """A DP-2 pod whose writer may change settings between batches (a rolling restart)."""

    def __init__(self, client: redis.Redis, mapping_keys: bool) -> None:
        self.applier = Applier(client, mapping_keys=mapping_keys)
        self.seqs = {0: 0, 1: 0}

    def send(self, rank: int, *events: Event, now: float = 100) -> None:
        seq = self.seqs[rank]
        self.seqs[rank] += 1
        batch = EventBatch(ts=0.0, events=list(events))
        self.applier.apply_batch(POD, MODEL, "vllm", rank, seq, batch, now=now)


def test_the_default_writer_writes_no_mapping_key(redis_client: redis.Redis) -> None:
    Applier(redis_client).apply_batch(
        POD, MODEL, "vllm", 0, 0, EventBatch(0.0, [BlockStored(("7",), TOKENS, 16, "GPU")]), 100
    )

    assert redis_client.hget(block_key(MODEL, STD), POD) == "100|GPU"
    assert not redis_client.exists(MAPPING)


@pytest.mark.parametrize("mapping_keys", [True, False], ids=["on", "off"])
def test_a_placeholder_of_another_rank_resolves_in_either_setting(
    redis_client: redis.Redis, mapping_keys: bool
) -> None:
    pod = _Pod(redis_client, mapping_keys)
    pod.send(0, BlockStored(("7",), TOKENS, 16, "GPU"))

    pod.send(1, BlockStored(("7",), (), 0, "CPU"))  # rank 1 holds it offloaded

    assert stream_blocks(redis_client, POD, 1).get("7") == f"{STD}|CPU"


def test_keys_left_from_when_it_was_on_go_with_garbage_collection(
    redis_client: redis.Redis,
) -> None:
    pod = _Pod(redis_client, mapping_keys=True)
    pod.send(0, BlockStored(("7",), TOKENS, 16, "GPU"), now=100)
    pod.applier = Applier(redis_client)  # switched off

    step = pod.applier.expire_step(POD, "0", "0", cutoff=300)

    assert step.ownerships == 1
    assert not redis_client.exists(MAPPING)


def test_keys_left_from_when_it_was_on_go_with_a_purge(redis_client: redis.Redis) -> None:
    pod = _Pod(redis_client, mapping_keys=True)
    pod.send(0, BlockStored(("7",), TOKENS, 16, "GPU"))

    Applier(redis_client).purge_pod(POD)

    assert not redis_client.exists(MAPPING)


def test_switched_on_a_replay_writes_the_keys_of_what_the_engine_holds(
    redis_client: redis.Redis,
) -> None:
    """The engine replays its buffer from seq 0 when the stream's status is reset."""
    off = _Pod(redis_client, mapping_keys=False)
    off.send(0, BlockStored(("7",), TOKENS, 16, "GPU"))
    assert not redis_client.exists(MAPPING)

    Applier(redis_client, mapping_keys=True).forget_pod(POD)
    on = _Pod(redis_client, mapping_keys=True)
    on.send(0, BlockStored(("7",), TOKENS, 16, "GPU"))

    assert redis_client.get(MAPPING) == STD
