"""vLLM's offload of one block: a placeholder in CPU, then the removal from GPU. The applier
folds such pairs into one script operation that does less work; the index must end exactly as
if the two events came in separate batches, whatever the block's holders."""

import pytest
import redis

from kvadmin.index.events import BlockRemoved, BlockStored, Event, EventBatch
from kvadmin.index.writer import Applier
from scoring.hashing import hash_block
from tests.index import MODEL
from tests.ingest.conftest import snapshot

POD = "p.ns"
TOKENS = tuple(range(16))
STD = hash_block(TOKENS)


def _gpu(engine_hash: str) -> BlockStored:
    return BlockStored((engine_hash,), TOKENS, 16, "GPU")


def _offload(engine_hash: str, to: str | None = "CPU", away: str | None = "GPU") -> list[Event]:
    return [BlockStored((engine_hash,), (), 0, to), BlockRemoved((engine_hash,), away)]


# Each: what the pod's ranks did before (rank, events), then rank 0's batch of offloads.
SCENARIOS = {
    "the only holder": ([(0, [_gpu("1")])], _offload("1")),
    "another rank keeps GPU": ([(0, [_gpu("1")]), (1, [_gpu("9")])], _offload("1")),
    "another engine hash keeps GPU": ([(0, [_gpu("1"), _gpu("2")])], _offload("1")),
    "already in CPU": ([(0, [_gpu("1"), *_offload("1", away="DISK")])], _offload("1")),
    "a removal without medium": ([(0, [_gpu("1")])], _offload("1", away=None)),
    "into an unlisted medium": ([(0, [_gpu("1")])], _offload("1", to="NVME")),
    "out of CPU into DISK": (
        [(0, [_gpu("1"), BlockStored(("1",), (), 0, "CPU")])],
        _offload("1", to="DISK", away="CPU"),
    ),
    "an unknown block": ([(1, [_gpu("7")])], _offload("7")),
    "never stored": ([], _offload("404")),
    "two in a row": ([(0, [_gpu("1"), _gpu("2")])], [*_offload("1"), *_offload("2")]),
    "events of several blocks": (  # not folded: all placeholders come before all removals
        [(0, [_gpu("1"), BlockStored(("1",), TOKENS, 16, "DISK")])],
        [BlockStored(("1", "1"), (), 0, "DISK"), BlockRemoved(("1", "1"), None)],
    ),
}


def _run(
    applier: Applier, before: list[tuple[int, list[Event]]], batches: list[list[Event]]
) -> dict[str, int]:
    """Apply what came before (a second apart), then `batches` of rank 0 (in one second);
    returns the counts of `batches`."""
    seqs = {0: 0, 1: 0}

    def send(rank: int, events: list[Event], now: int) -> dict[str, int]:
        batch = EventBatch(0.0, events)
        result = applier.apply_batch(POD, MODEL, "vllm", rank, seqs[rank], batch, now)
        seqs[rank] += 1
        return result.counts

    for now, (rank, events) in enumerate(before, start=100):
        send(rank, events, now)
    counts: dict[str, int] = {}
    for events in batches:
        for name, count in send(0, events, 200).items():
            counts[name] = counts.get(name, 0) + count
    counts.pop("events")
    return counts


@pytest.mark.parametrize("name", SCENARIOS)
def test_an_offload_pair_ends_as_its_two_events_apart(
    applier: Applier, redis_client: redis.Redis, name: str
) -> None:
    before, offloads = SCENARIOS[name]
    apart_counts = _run(applier, before, [[event] for event in offloads])
    apart = snapshot(redis_client, status=False)
    redis_client.flushdb()

    together_counts = _run(applier, before, [offloads])

    assert snapshot(redis_client, status=False) == apart
    assert together_counts == apart_counts
