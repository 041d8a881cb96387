"""A large synthetic index built through the real writer, snapshots of Redis, and the oracles the
garbage-collection tests compare against."""

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

import redis

from kvadmin.index import engine_blocks
from kvadmin.index.events import BlockStored
from scoring.keys import residency_score, residency_seconds
from scoring.weights import TierWeights
from tests.engine_blocks import PREFIX as ENGINE_BLOCKS_PREFIX
from tests.index import IngestedIndex, block_tokens

PODS = {"vllm-0.ns": ("vllm", 2), "vllm-1.ns": ("vllm", 1), "sglang-0.ns": ("sglang", 1)}
"""pod -> (engine kind, data-parallel ranks)."""
VALUE = re.compile(r"^\d+(\|.+)?$")
DEFAULT_WEIGHTS = TierWeights()


@dataclass
class _Streams:
    """Batches per (pod, rank, store time), applied in store-time order with rising seqs."""

    pending: dict[tuple[str, int, int], list[BlockStored]] = field(default_factory=dict)

    def add(self, pod: str, rank: int, at: int, event: BlockStored) -> None:
        self.pending.setdefault((pod, rank, at), []).append(event)

    def apply(self, index: IngestedIndex) -> None:
        for (pod, rank, at), events in sorted(self.pending.items(), key=lambda item: item[0][2]):
            kind = PODS[pod][0]
            for start in range(0, len(events), 200):
                index.send(pod, *events[start : start + 200], at=at, rank=rank, kind=kind)
        self.pending.clear()


def build_index(index: IngestedIndex, blocks: int, old: int, new: int) -> None:
    """`blocks` GPU blocks spread over the pods and their ranks, even ones stored at `old`,
    odd ones at `new`; mixed on purpose:
    - every 10th is offloaded to CPU (a placeholder) at the other time, so one medium is stale
      and the other fresh;
    - every 7th is also stored by the next pod at the other time (two owners, one stale);
    - every 11th is stored again under a second engine hash on another rank of a DP pod at the
      same time (reference count 2)."""
    names = list(PODS)
    stores, placeholders = _Streams(), _Streams()
    for n in range(blocks):
        pod = names[n % len(names)]
        ranks = PODS[pod][1]
        rank = (n // len(names)) % ranks
        at, other = (old, new) if n % 2 == 0 else (new, old)
        engine_hash = str(1_000_000 + n)
        stores.add(pod, rank, at, BlockStored((engine_hash,), block_tokens(n), 16, "GPU"))
        if n % 10 == 0:
            placeholders.add(pod, rank, other, BlockStored((engine_hash,), (), 0, "CPU"))
        if n % 7 == 0:
            neighbour = names[(n + 1) % len(names)]
            shared = BlockStored((str(3_000_000 + n),), block_tokens(n), 16, "GPU")
            stores.add(neighbour, 0, other, shared)
        if n % 11 == 0 and ranks > 1:
            second = str(2_000_000 + n)
            stores.add(
                pod, (rank + 1) % ranks, at, BlockStored((second,), block_tokens(n), 16, "GPU")
            )
    stores.apply(index)
    placeholders.apply(index)


def snapshot(client: redis.Redis, skip: tuple[str, ...] = ("kvadmin:gc:",)) -> dict[str, object]:
    """Every key and its content, read in pipelines (a test may scan; the product never does)."""
    names = sorted(k for k in client.scan_iter(count=10_000) if not k.startswith(skip))
    pipe = client.pipeline(transaction=False)
    for key in names:
        pipe.type(key)
    types = pipe.execute()
    for key, kind in zip(names, types, strict=True):
        if kind == "hash":
            pipe.hgetall(key)
        elif kind == "string":
            pipe.get(key)
        elif kind == "set":
            pipe.smembers(key)
        else:
            pipe.zrange(key, 0, -1, withscores=True)
    return dict(zip(names, pipe.execute(), strict=True))


def expected_after_gc(
    before: dict[str, object], cutoff: int, weights: TierWeights = DEFAULT_WEIGHTS
) -> dict[str, object]:
    """What garbage collection must leave: every (pod, block, medium) residency older than
    `cutoff` gone together with everything that depends on it, nothing else touched. A matrix
    value whose medium went names the best medium left (by `weights`, the applier's default)
    with the time of its last store."""
    after = dict(before)
    held: dict[tuple[str, str], dict[str, float]] = {}
    for key, content in before.items():
        if key.startswith("kvadmin:res:"):
            pod, _, medium = key.removeprefix("kvadmin:res:").partition("|")
            fresh = [(std, score) for std, score in content if score >= residency_score(cutoff)]
            for std, score in fresh:
                held.setdefault((pod, std), {})[medium] = score
            _put(after, key, fresh)
    for key, content in before.items():
        if key.startswith("kvadmin:media:"):
            pod = key.removeprefix("kvadmin:media:")
            _put(after, key, {m for m in content if f"kvadmin:res:{pod}|{m}" in after})
        elif key.startswith("kvadmin:rc:"):
            pod = key.removeprefix("kvadmin:rc:")
            _put(after, key, {f: c for f, c in content.items() if _holds(held, pod, f)})
        elif key.startswith(ENGINE_BLOCKS_PREFIX):
            head, _, bucket = key.removeprefix(ENGINE_BLOCKS_PREFIX).rpartition(":")
            pod = head.partition("|")[0]
            kind = "sglang" if pod.startswith("sglang") else "vllm"
            kept = {}
            for name, text in content.items():
                std, media = engine_blocks.Entry.parse(text)
                left = tuple(m for m in media if m in held.get((pod, std), {}))
                if left:
                    kept[name] = engine_blocks.Entry(std, left).value
                else:
                    engine_hash = engine_blocks.engine_hash(name, int(bucket))
                    after.pop(f"{kind}:kv:block:{pod}@{engine_hash}", None)
            _put(after, key, kept)
        elif key.startswith("matrix:kv:block:"):
            std = key.rpartition("@")[2]
            fields = {}
            for pod, value in content.items():
                media = held.get((pod, std))
                if not media:
                    continue
                medium = value.partition("|")[2]
                if medium not in media:
                    best = weights.best_medium(media)
                    value = str(residency_seconds(media[best])) + (f"|{best}" if best else "")
                fields[pod] = value
            _put(after, key, fields)
    return after


def _holds(held: dict[tuple[str, str], dict[str, float]], pod: str, rc_field: str) -> bool:
    std, _, medium = rc_field.partition("|")
    return medium in held.get((pod, std), {})


def _put(snapshot: dict[str, object], key: str, content: object) -> None:
    if content:
        snapshot[key] = content
    else:
        snapshot.pop(key, None)


def kthena_violations(client: redis.Redis) -> Iterator[str]:
    """What kthena's router could trip over: matrix values not "ts" or "ts|MEDIUM", and
    fields whose pod holds the block in no medium."""
    for key in client.scan_iter("matrix:kv:block:*", count=10_000):
        std = key.rpartition("@")[2]
        for pod, value in client.hgetall(key).items():
            if not VALUE.match(value):
                yield f"{key} {pod}: {value!r}"
            media = client.smembers(f"kvadmin:media:{pod}")
            if not any(client.zscore(f"kvadmin:res:{pod}|{m}", std) for m in media):
                yield f"{key} {pod}: no residency"
