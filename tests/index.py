"""What the tests' index holds, and the two ways a test puts blocks into it.

- `IngestedIndex`: KV events fed to the real writer (`Applier`), as ingestion leaves the index
  (matrix, residency, refcounts, mappings, stream status). For tests about what kvadmin keeps
  and shows.
- `write_kthena_index`: the raw kthena layout (compatibility.md 2.2, 2.7), as kthena's own
  sidecar writes it, with nothing of kvadmin's bookkeeping beyond the residency the legacy
  format needs. For tests about reading an index kthena wrote."""

from collections.abc import Iterable, Mapping

import pytest
import redis

from kvadmin.index.events import BlockRemoved, BlockStored, EventBatch
from kvadmin.index.streams import IndexedStream, StreamId
from kvadmin.index.writer import Applier
from scoring.hashing import hash_block
from scoring.keys import block_key, pod_media_key, residency_key, residency_score
from scoring.values import ValueFormat, parse_value

MODEL = "Qwen/Qwen3-8B"
"""The model of every test that needs one; a test about a second model uses OTHER_MODEL."""

OTHER_MODEL = "meta-llama/Llama-3.1-8B"
"""A second model, for tests about what one model's entries do (or do not do) to another's."""

NOW = 1_760_000_000
"""When the index's entries are written, unless a test says otherwise."""

VALUE_FORMATS = [pytest.param(fmt, id=fmt.value) for fmt in ValueFormat]
"""Both value formats, for the kthena-format checks that must hold under each."""

MAPPING_KEYS = [
    pytest.param(on, id=f"mapping-keys-{'on' if on else 'off'}") for on in (True, False)
]
"""Both settings of KVADMIN_SIDECAR_MAPPING_KEYS (compatibility.md 2.3), for the checks that
must hold under each."""


def block_tokens(n: int) -> tuple[int, ...]:
    """16 tokens unique to block number n."""
    return tuple(range(n * 16, n * 16 + 16))


def std(n: int) -> int:
    """Block n's standardized hash: the one kthena's keys name."""
    return hash_block(block_tokens(n))


def engine_hash(n: int, rank: int = 0) -> str:
    """The engine's id of block n on one rank: engines chain hashes, ranks differ."""
    return str(2**63 + 1000 + n + rank * 10**6)


class IngestedIndex:
    """Feeds KV events to the real Applier, one stream per (pod, rank) with rising seqs, like
    the ingest loop. `applier` may be replaced between sends (a worker with other settings)."""

    def __init__(self, client: redis.Redis) -> None:
        self.applier = Applier(client)
        self.seqs: dict[StreamId, int] = {}

    def send(
        self,
        pod: str,
        *events: object,
        at: float = NOW,
        rank: int = 0,
        pushed: bool = False,
        model: str = MODEL,
        kind: str = "vllm",
    ) -> None:
        """One batch of `events` from the pod's rank (or its pushed batches), applied at `at`."""
        stream = StreamId(pod, rank, pushed)
        seq = self.seqs[stream] = self.seqs.get(stream, -1) + 1
        batch = EventBatch(ts=float(at), events=list(events))  # type: ignore[arg-type]
        indexed = IndexedStream(stream, model, kind)
        self.applier.apply_batches(indexed, [(seq, batch)], now=at)

    def store(self, pod: str, blocks: Iterable[int], medium: str | None = "GPU", **options) -> None:
        """The pod's engine stores blocks (with their tokens) in `medium`, in one event."""
        blocks = list(blocks)
        rank = options.get("rank", 0)
        event = BlockStored(
            tuple(engine_hash(n, rank) for n in blocks),
            tuple(t for n in blocks for t in block_tokens(n)),
            16,
            medium,
        )
        self.send(pod, event, **options)

    def offload(self, pod: str, blocks: Iterable[int], medium: str = "CPU", **options) -> None:
        """vLLM's offloading connector announces known blocks in another tier, no tokens."""
        rank = options.get("rank", 0)
        event = BlockStored(tuple(engine_hash(n, rank) for n in blocks), (), 0, medium)
        self.send(pod, event, **options)

    def remove(self, pod: str, blocks: Iterable[int], medium: str = "GPU", **options) -> None:
        """The pod's engine evicts blocks from `medium`."""
        rank = options.get("rank", 0)
        self.send(pod, BlockRemoved(tuple(engine_hash(n, rank) for n in blocks), medium), **options)


def write_kthena_index(
    client: redis.Redis,
    index: Mapping[int, Mapping[str, str]],
    model: str = MODEL,
    value_format: ValueFormat = ValueFormat.TIERED,
) -> None:
    """`index`: block hash -> pod -> raw value text, as the tiered format writes it. Under the
    legacy format the matrix gets the timestamp alone and the medium goes to the pod's
    residency (its media SET and per-medium ZSET), as the writer keeps it in either format."""
    pipeline = client.pipeline(transaction=False)
    for block, owners in index.items():
        if not owners:
            continue
        if value_format is ValueFormat.TIERED:
            pipeline.hset(block_key(model, block), mapping=dict(owners))
            continue
        for pod, raw in owners.items():
            value = parse_value(raw)
            pipeline.hset(block_key(model, block), pod, value.timestamp)
            medium = value.medium or ""
            score = residency_score(value.seconds) if value.seconds is not None else 0
            pipeline.zadd(residency_key(pod, medium), {str(block): score})
            pipeline.sadd(pod_media_key(pod), medium)
    pipeline.execute()
