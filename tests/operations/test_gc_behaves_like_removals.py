"""Garbage collection drops stale ownership exactly as the engine's removal events would have:
what the engine sends afterwards (removals of collected blocks, stores of them again) keeps
refcounts, residency and the matrix value right; per-rank and per-medium ownership that was
refreshed stays."""

import redis

from kvadmin.index import gc
from kvadmin.index.events import AllBlocksCleared, BlockRemoved, BlockStored
from kvadmin.index.writer import Applier
from scoring.keys import (
    block_key,
    engine_hash_key,
    refcount_key,
    residency_key,
    residency_score,
)
from tests.engine_blocks import stream_blocks
from tests.index import MODEL, block_tokens, std

POD = "vllm-0.ns"
OLD, NOW, MAX_AGE = 1_000, 1_000_000, 86_400


class DiesBeforeDraining(Applier):
    """A worker that dies right after applying a clear, before it drains the retired blocks."""

    def drain(self, *args: object, **kwargs: object) -> None:
        return None


def stored(n: int, medium: str = "GPU", engine_hash: int | None = None) -> BlockStored:
    return BlockStored((str(engine_hash or 100 + n),), block_tokens(n), 16, medium)


def offloaded(n: int, medium: str = "CPU") -> BlockStored:
    return BlockStored((str(100 + n),), (), 0, medium)


def _collect(client: redis.Redis) -> gc.GcReport:
    return gc.collect_garbage(Applier(client), MAX_AGE, registered=lambda: {POD}, now=NOW)


def test_a_collected_block_can_be_removed_and_stored_again(redis_client, index) -> None:
    index.send(POD, stored(1), at=OLD)
    _collect(redis_client)

    index.send(POD, BlockRemoved(("101",), "GPU"), at=NOW)
    assert redis_client.hgetall(refcount_key(POD)) == {}
    index.send(POD, stored(1), at=NOW)

    assert redis_client.zscore(residency_key(POD, "GPU"), str(std(1))) == residency_score(NOW)
    assert redis_client.hget(block_key(MODEL, std(1)), POD) == f"{NOW}|GPU"
    index.send(POD, BlockRemoved(("101",), "GPU"), at=NOW)
    assert redis_client.exists(block_key(MODEL, std(1)), residency_key(POD, "GPU")) == 0


def test_a_stale_gpu_copy_goes_and_the_fresh_cpu_copy_takes_over(redis_client, index) -> None:
    index.applier = Applier(redis_client, mapping_keys=True)  # the CPU copy keeps the key
    index.send(POD, stored(1), at=OLD)
    index.send(POD, offloaded(1), at=NOW - 10)

    report = _collect(redis_client)

    assert (report.ownerships, report.blocks) == (1, 0)
    assert redis_client.hget(block_key(MODEL, std(1)), POD) == f"{NOW - 10}|CPU"
    assert stream_blocks(redis_client, POD, 0).get("101") == f"{std(1)}|CPU"
    assert redis_client.get(engine_hash_key("vllm", POD, 101)) == str(std(1))
    assert redis_client.zscore(residency_key(POD, "GPU"), str(std(1))) is None


def test_a_block_another_rank_stored_again_stays(redis_client, index) -> None:
    """Residency is the pod's last store of the block in that medium, by any rank."""
    index.send(POD, stored(1), at=OLD)
    index.send(POD, stored(1, engine_hash=555), at=NOW - 10, rank=1)

    report = _collect(redis_client)

    assert report.ownerships == 0
    assert redis_client.hget(refcount_key(POD), f"{std(1)}|GPU") == "2"
    assert redis_client.hget(block_key(MODEL, std(1)), POD) == f"{NOW - 10}|GPU"


def test_blocks_a_dead_worker_left_retired_are_released_first(redis_client, index) -> None:
    """A clear whose drain never ran (the worker died) still holds references: the collector
    drains them, then collects."""
    index.send(POD, stored(1), stored(2), at=OLD)
    index.applier = DiesBeforeDraining(redis_client)
    index.send(POD, AllBlocksCleared(), at=NOW - 10)
    assert redis_client.zcard(residency_key(POD, "GPU")) == 2

    _collect(redis_client)

    assert redis_client.hgetall(refcount_key(POD)) == {}
    assert redis_client.exists(block_key(MODEL, std(1)), block_key(MODEL, std(2))) == 0
