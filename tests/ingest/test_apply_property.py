"""The index equals the engines' true caches: random runs of stores, offload placeholders (also
directly followed by the removal of the same blocks from another medium), removals, clears and
stream purges over 2 pods x 2 ranks with colliding contents, checked
against a plain Python model of what each stream holds. kthena's mapping keys are per pod: one
stays while any rank of the pod holds its engine block; with the setting off there are none,
and everything else is the same."""

from collections import Counter
from dataclasses import dataclass, field

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvadmin.index.events import AllBlocksCleared, BlockRemoved, BlockStored, Event, EventBatch
from kvadmin.index.writer import Applier
from scoring.hashing import hash_block
from scoring.keys import (
    POD_KINDS_KEY,
    POD_MODELS_KEY,
    block_key,
    engine_hash_key,
    pod_media_key,
    pod_ranks_key,
    refcount_key,
    residency_key,
    residency_score,
    stream_status_key,
)
from scoring.values import ValueFormat
from scoring.weights import TierWeights
from tests.engine_blocks import PREFIX as ENGINE_BLOCKS_PREFIX
from tests.engine_blocks import by_stream
from tests.index import MAPPING_KEYS, MODEL, VALUE_FORMATS

PODS = ("a.ns", "b.ns")
RANKS = (0, 1)
CONTENTS = [tuple(range(16 * i, 16 * i + 16)) for i in range(3)]
STDS = [hash_block(tokens) for tokens in CONTENTS]
# Engine hash -> content: 0 and 3 share content (same tokens under another prefix); the last
# pair gives engine hash 0 other content, which no engine does but the index must survive.
PAIRS = [(str(e), e % 3) for e in range(6)] + [("0", 1)]
DEFAULT_WEIGHTS = TierWeights()


def _best(media: set[str]) -> str:
    """The medium that scores highest under kthena's default weights (the applier's default)."""
    return min(media, key=lambda m: DEFAULT_WEIGHTS.medium_rank(m or None))


Stream = tuple[str, int]


@dataclass
class Reference:
    """What the engines hold, and the index bookkeeping the layout promises for it."""

    held: dict[Stream, dict[str, tuple[int, list[str]]]] = field(default_factory=dict)
    mapping: dict[str, dict[str, int]] = field(default_factory=dict)
    stored_at: dict[tuple[str, int, str], int] = field(default_factory=dict)
    values: dict[tuple[str, int], tuple[int, str]] = field(default_factory=dict)
    ranks: dict[str, set[int]] = field(default_factory=dict)
    pods: set[str] = field(default_factory=set)
    counters: Counter = field(default_factory=Counter)
    retired: list[tuple[Stream, dict[str, tuple[int, list[str]]]]] = field(default_factory=list)
    """Engine blocks moved aside by a clear, released at the end of the batch."""

    def count(self, pod: str) -> Counter:
        counts: Counter = Counter()
        for (p, _), blocks in self.held.items():
            if p == pod:
                for std, media in blocks.values():
                    counts.update(f"{std}|{m}" for m in media)
        for (p, _), blocks in self.retired:
            if p == pod:
                for std, media in blocks.values():
                    counts.update(f"{std}|{m}" for m in media)
        return counts

    def media_of(self, pod: str, std: int) -> set[str]:
        counts = self.count(pod)
        return {
            key.split("|", 1)[1] for key, n in counts.items() if n and key.startswith(f"{std}|")
        }

    def _hold(self, stream: Stream, eh: str, std: int, m: str, primary: bool, now: int) -> None:
        pod = stream[0]
        blocks = self.held.setdefault(stream, {})
        if eh in blocks:
            media = blocks[eh][1]
            if m not in media:
                media.insert(0, m) if primary else media.append(m)
        else:
            blocks[eh] = (std, [m])
        self.stored_at[(pod, std, m)] = now
        current = self.values.get((pod, std))
        best = m if current is None else _best({current[1], m})
        self.values[(pod, std)] = (now, best)

    def _release(self, pod: str, std: int, x: str) -> None:
        """Called after the holder is gone from `held`/`retired`."""
        if x in self.media_of(pod, std):
            return
        current = self.values.get((pod, std))
        if current is not None and current[1] != x:
            return
        left = self.media_of(pod, std)
        if left:
            best = _best(left)
            self.values[(pod, std)] = (self.stored_at[(pod, std, best)], best)
        else:
            self.values.pop((pod, std), None)

    def apply(self, stream: Stream, events: list[Event], now: int) -> None:
        pod, rank = stream
        self.pods.add(pod)
        self.ranks.setdefault(pod, set()).add(rank)
        mapping = self.mapping.setdefault(pod, {})
        retired_here: list[dict[str, tuple[int, list[str]]]] = []
        for event in events:
            blocks = self.held.setdefault(stream, {})
            if isinstance(event, AllBlocksCleared):
                if blocks:
                    self.retired.append((stream, blocks))
                    retired_here.append(blocks)
                    self.held[stream] = {}
            elif isinstance(event, BlockRemoved):
                for eh in event.block_hashes:
                    if eh not in blocks:
                        self.counters[stream, "unknown_removals"] += 1
                        continue
                    std, media = blocks[eh]
                    m = event.medium or ""
                    if m in media:
                        x = m
                    elif m == "":
                        x = media[0]
                    else:
                        self.counters[stream, "unknown_removals"] += 1
                        continue
                    media.remove(x)
                    if not media:
                        del blocks[eh]
                        self._forget_mapping(pod, eh)
                    self._release(pod, std, x)
            elif isinstance(event, BlockStored):
                m = event.medium or ""
                n, size = len(event.block_hashes), event.block_size
                if event.token_ids and size and len(event.token_ids) == n * size:
                    for i, eh in enumerate(event.block_hashes):
                        std = hash_block(event.token_ids[i * size : (i + 1) * size])
                        if eh in blocks and blocks[eh][0] != std:
                            old_std, old_media = blocks.pop(eh)
                            self.counters[stream, "std_conflicts"] += 1
                            for x in old_media:
                                self._release(pod, old_std, x)
                        self._hold(stream, eh, std, m, True, now)
                        mapping[eh] = std
                else:
                    if event.token_ids:
                        self.counters[stream, "token_mismatch"] += 1
                    for eh in event.block_hashes:
                        if eh in blocks:
                            self._hold(stream, eh, blocks[eh][0], m, False, now)
                        elif (other := self._held_elsewhere(stream, eh)) is not None:
                            self._hold(stream, eh, other, m, False, now)
                        else:
                            self.counters[stream, "unresolved_placeholders"] += 1
        for blocks in retired_here:
            self._drain(stream, blocks)

    def _drain(self, stream: Stream, blocks: dict[str, tuple[int, list[str]]]) -> None:
        pod = stream[0]
        self.retired = [(s, b) for s, b in self.retired if b is not blocks]
        for eh, (std, media) in blocks.items():
            for x in media:
                self._release(pod, std, x)
            self._forget_mapping(pod, eh)

    def _held_elsewhere(self, stream: Stream, eh: str) -> int | None:
        """The content another stream of the pod holds `eh` as: where a placeholder the stream
        does not hold finds its content (with two ranks, there is one other)."""
        for other, blocks in self.held.items():
            if other[0] == stream[0] and other != stream and eh in blocks:
                return blocks[eh][0]
        return None

    def _forget_mapping(self, pod: str, eh: str) -> None:
        """kthena's mapping key is per pod: it goes once no stream of the pod holds `eh`
        (engine blocks moved aside by a clear or a purge hold nothing)."""
        if not any(p == pod and eh in blocks for (p, _), blocks in self.held.items()):
            self.mapping.get(pod, {}).pop(eh, None)

    def purge_stream(self, stream: Stream) -> None:
        pod, rank = stream
        blocks = self.held.pop(stream, {})
        self.ranks.get(pod, set()).discard(rank)
        if blocks:
            self.retired.append((stream, blocks))
            self._drain(stream, blocks)
        if not self.ranks.get(pod) and not +self.count(pod):
            self.pods.discard(pod)


def _expected_keys(
    ref: Reference, value_format: ValueFormat, mapping_keys: bool
) -> dict[str, object]:
    """The legacy format's matrix values are the tiered ones without the medium; every other
    key is the same in both formats (compatibility.md 2.7). The mapping keys exist only with
    their setting on (2.3)."""
    expected: dict[str, object] = {}
    for (pod, std), (ts, m) in ref.values.items():
        expected.setdefault(block_key(MODEL, std), {})[pod] = value_format.field_value(ts, m)
    for pod, hashes in ref.mapping.items():
        for eh, std in hashes.items():
            if mapping_keys:
                expected[engine_hash_key("vllm", pod, eh)] = str(std)
    for (pod, rank), blocks in ref.held.items():
        if blocks:
            expected[f"engine blocks {pod}|{rank}"] = {
                eh: f"{std}|{','.join(media)}" for eh, (std, media) in blocks.items()
            }
    for pod in PODS:
        counts = +ref.count(pod)
        shared = {key: str(n) for key, n in counts.items() if n > 1}
        if shared:  # one holder is the residency entry alone
            expected[refcount_key(pod)] = shared
        media: set[str] = set()
        for key in counts:
            std, m = key.split("|", 1)
            media.add(m)
            at = residency_score(ref.stored_at[pod, int(std), m])
            expected.setdefault(residency_key(pod, m), {})[std] = at
        if media:
            expected[pod_media_key(pod)] = media
        if ref.ranks.get(pod):
            expected[pod_ranks_key(pod)] = {str(r) for r in ref.ranks[pod]}
    if ref.pods:
        expected[POD_MODELS_KEY] = {pod: MODEL for pod in ref.pods}
        expected[POD_KINDS_KEY] = {pod: "vllm" for pod in ref.pods}
    return expected


def _actual_keys(client: redis.Redis) -> dict[str, object]:
    actual: dict[str, object] = dict(by_stream(client))
    for key in client.keys("*"):
        if key.startswith(("kvadmin:stream:", ENGINE_BLOCKS_PREFIX)):
            continue
        kind = client.type(key)
        if kind == "hash":
            actual[key] = client.hgetall(key)
        elif kind == "string":
            actual[key] = client.get(key)
            assert 0 < client.ttl(key) <= 86400
        elif kind == "set":
            actual[key] = client.smembers(key)
        else:
            actual[key] = {m: int(s) for m, s in client.zrange(key, 0, -1, withscores=True)}
    return actual


_streams = st.sampled_from([(pod, rank) for pod in PODS for rank in RANKS])
_pairs = st.lists(st.sampled_from(PAIRS), min_size=1, max_size=3, unique_by=lambda p: p[0])
_hashes = st.lists(st.sampled_from([str(e) for e in range(7)]), min_size=1, max_size=3)
_events = st.one_of(
    st.builds(
        lambda pairs, m: BlockStored(
            tuple(eh for eh, _ in pairs), sum((CONTENTS[c] for _, c in pairs), ()), 16, m
        ),
        _pairs,
        st.sampled_from(["GPU", "CPU", None, "DISK"]),
    ),
    st.builds(
        lambda hashes, m: BlockStored(tuple(hashes), (), 0, m),
        _hashes,
        st.sampled_from(["CPU", "DISK", "GPU"]),
    ),
    st.builds(
        lambda hashes: BlockStored(tuple(hashes), tuple(range(5)), 16, "CPU"),
        _hashes,
    ),
    st.builds(
        lambda hashes, m: BlockRemoved(tuple(hashes), m),
        _hashes,
        st.sampled_from(["GPU", "CPU", None, "DISK"]),
    ),
    st.just(AllBlocksCleared()),
)
# vLLM's offload: a placeholder in one medium, then the removal of the same blocks from another
# (the applier folds the pair into one operation when it is of one block; runs of such pairs
# into one operation of several).
_offload = st.builds(
    lambda hashes, to, away: [
        BlockStored(tuple(hashes), (), 0, to),
        BlockRemoved(tuple(hashes), away),
    ],
    st.lists(st.sampled_from([str(e) for e in range(7)]), min_size=1, max_size=2),
    st.sampled_from(["CPU", "DISK", "GPU", None]),
    st.sampled_from(["GPU", "CPU", None, "DISK"]),
)
_batch = st.lists(st.one_of(_events.map(lambda event: [event]), _offload), min_size=1, max_size=3)
_steps = st.lists(
    st.one_of(
        st.tuples(st.just("batch"), _streams, _batch.map(lambda runs: sum(runs, []))),
        st.tuples(st.just("purge_stream"), _streams, st.just([])),
    ),
    min_size=1,
    max_size=25,
)


@settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@pytest.mark.parametrize("value_format", VALUE_FORMATS)
@pytest.mark.parametrize("mapping_keys", MAPPING_KEYS)
@given(steps=_steps)
def test_the_index_equals_the_engines_caches(
    redis_client: redis.Redis, steps: list, value_format: ValueFormat, mapping_keys: bool
) -> None:
    redis_client.flushdb()
    applier = Applier(
        redis_client, chunk_size=2, value_format=value_format, mapping_keys=mapping_keys
    )
    ref = Reference()
    seqs: Counter = Counter()
    for now, (action, stream, events) in enumerate(steps, start=1000):
        pod, rank = stream
        if action == "purge_stream":
            applier.purge_stream(pod, rank)
            ref.purge_stream(stream)
            continue
        result = applier.apply_batch(
            pod, MODEL, "vllm", rank, seqs[stream], EventBatch(0.0, events), now=now
        )
        assert result.applied
        seqs[stream] += 1
        ref.apply(stream, events, now)

    assert _actual_keys(redis_client) == _expected_keys(ref, value_format, mapping_keys)
    for pod, rank in seqs:
        status = redis_client.hgetall(stream_status_key(pod, rank))
        for counter in (
            "unknown_removals",
            "std_conflicts",
            "token_mismatch",
            "unresolved_placeholders",
        ):
            assert int(status.get(counter, 0)) == ref.counters[(pod, rank), counter], counter
