"""Reading the block index from Redis for one scoring call, in one round trip (compatibility.md 2.4,
5.8).

Two readers give the same `PrefixWalk` for every index:
- `BaselineIndexReader` reads the way kthena does: one pipeline with HGETALL per block key,
  every owner's value parsed client side, then `walk_prefix`. Kept as the reference and the
  benchmark baseline.
- `IndexReader` runs the walk inside Redis (`prefix_walk.lua`): it stops at the first block that
  leaves no pod matching, reads later blocks only for pods still matching, and returns only the
  runs of media per pod plus the dropped pods, so far less crosses the wire and far less is
  parsed in Python.

Both also read, when asked (`StateRequest`), the routing state of the `ttft` policy for the
candidate pods (scoring.route_state): virtual queue, requests in flight, speculative entries and
the engines' scraped load, in the same round trip, and give the same `RouteState`.

The script reads many keys, so on a Redis Cluster it needs all block keys of a model in one
slot, which kthena's key layout does not give; `BaselineIndexReader` works there unchanged. Under
the legacy value format (compatibility.md 2.7) the script also reads the scored pods' residency
keys, which it names itself from their layout (not passed as KEYS: the pods are known only
once the walk found them).
"""

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, replace
from itertools import chain
from time import perf_counter
from types import MappingProxyType
from typing import Any

import msgspec
import redis
import redis.asyncio

from scoring.hashing import DEFAULT_BLOCK_SIZE, DEFAULT_MAX_BLOCKS, block_hashes
from scoring.keys import (
    LOAD_FIELDS,
    QUEUE_FIELDS,
    block_key,
    block_keys,
    pod_media_key,
    residency_key,
    speculative_groups_key,
    speculative_key,
)
from scoring.route_state import (
    RawPodState,
    RouteState,
    StateRequest,
    speculative_entries,
    speculative_positions,
    state_keys,
)
from scoring.score import (
    HeldMedia,
    MediaRun,
    PrefixWalk,
    ScoreResult,
    Span,
    Timings,
    score_walk,
    spans,
    walk_prefix,
)
from scoring.scripts import script
from scoring.values import ValueFormat, parse_value, pod_start
from scoring.weights import TierWeights

WALK = script("prefix_walk")
_PACK = msgspec.msgpack.Encoder().encode
if RawPodState.__struct_fields__ != (*QUEUE_FIELDS, "in_flight", *LOAD_FIELDS, "speculative"):
    raise AssertionError("walk_reply builds RawPodState by position, in the reply's order")


StartKeys = Mapping[str, Sequence[str]]
"""Per pod, the status hashes of its data-parallel ranks' streams, whose `started_at` field (unix
seconds) is the start of the rank's current run: a reader takes them in the same round trip as the
blocks. The pod's start is the earliest of them, unknown while a rank has none
(`scoring.values.pod_start`), or the caller's `pod_started_at` when that is later
(compatibility.md 2.4 step 1)."""
NO_START_KEYS: StartKeys = MappingProxyType({})


class PrefixReader(ABC):
    """What `score_request` needs of an index reader: `read`, of which `walk` is the part
    without routing state."""

    def walk(
        self,
        client: redis.Redis,
        model: str,
        blocks: Sequence[int],
        candidates: Set[str] | None,
        pod_started_at: Mapping[str, int],
        start_keys: StartKeys = NO_START_KEYS,
        value_format: ValueFormat = ValueFormat.TIERED,
    ) -> PrefixWalk:
        """Walk the request's `blocks` of `model` over the index (one round trip)."""
        return self.read(
            client,
            model,
            blocks,
            candidates,
            pod_started_at,
            start_keys,
            value_format=value_format,
        )[0]

    @abstractmethod
    def read(
        self,
        client: redis.Redis,
        model: str,
        blocks: Sequence[int],
        candidates: Set[str] | None,
        pod_started_at: Mapping[str, int],
        start_keys: StartKeys = NO_START_KEYS,
        state: StateRequest | None = None,
        value_format: ValueFormat = ValueFormat.TIERED,
    ) -> tuple[PrefixWalk, RouteState | None]:
        """`walk`, plus the routing `state` asked for, in the same round trip. Under the
        legacy `value_format` the walk's `held` media come from kvadmin's residency."""


class BaselineIndexReader(PrefixReader):
    """kthena's way: fetch every block's owners, parse every value, walk in Python."""

    def read(
        self,
        client: redis.Redis,
        model: str,
        blocks: Sequence[int],
        candidates: Set[str] | None,
        pod_started_at: Mapping[str, int],
        start_keys: StartKeys = NO_START_KEYS,
        state: StateRequest | None = None,
        value_format: ValueFormat = ValueFormat.TIERED,
    ) -> tuple[PrefixWalk, RouteState | None]:
        if not blocks and not (state and state.pods):
            return PrefixWalk({}), None
        pipeline = client.pipeline(transaction=False)
        for block in blocks:
            pipeline.hgetall(block_key(model, block))
        starts = [(pod, key) for pod, pod_keys in start_keys.items() for key in pod_keys]
        for _pod, key in starts:
            pipeline.hget(key, "started_at")
        state_pods = list(state.pods) if state else []
        if state and state_pods:
            if state.now_ms is None:
                pipeline.time()
            for pod in state_pods:
                queue, in_flight, load = state_keys(pod)
                pipeline.hmget(queue, QUEUE_FIELDS)
                pipeline.zrange(in_flight, 0, -1, withscores=True)
                pipeline.hmget(load, LOAD_FIELDS)
            if blocks:
                pipeline.hmget(speculative_key(model), [str(block) for block in blocks])
                pipeline.hgetall(speculative_groups_key(model))
        replies = pipeline.execute()
        owners = {
            block: {pod: parse_value(raw) for pod, raw in reply.items()}
            for block, reply in zip(blocks, replies[: len(blocks)], strict=True)
        }
        at = len(blocks) + len(starts)
        rank_starts: dict[str, list[int | None]] = {}
        for (pod, _key), value in zip(starts, replies[len(blocks) : at], strict=True):
            rank_starts.setdefault(pod, []).append(None if value is None else int(value))
        started = dict(pod_started_at)
        for pod, values in rank_starts.items():
            if (start := pod_start(values)) is not None:
                started[pod] = max(start, started.get(pod, start))
        walk = walk_prefix(blocks, owners, candidates, started)
        if value_format is ValueFormat.LEGACY:
            walk = replace(walk, held=_baseline_held(client, blocks, walk))
        if not (state and state_pods):
            return walk, None
        return walk, _baseline_state(state, walk, replies[at:])


class IndexReader(PrefixReader):
    """kvadmin's way: the walk runs server side (see the module docstring).

    The script goes by SHA (EVALSHA, `scoring.scripts`), loaded when a server answers NOSCRIPT
    (first use, restart, failover, SCRIPT FLUSH), so only the first call against a server takes
    extra round trips. The client must decode responses
    (`decode_responses=True`).
    """

    def read(
        self,
        client: redis.Redis,
        model: str,
        blocks: Sequence[int],
        candidates: Set[str] | None,
        pod_started_at: Mapping[str, int],
        start_keys: StartKeys = NO_START_KEYS,
        state: StateRequest | None = None,
        value_format: ValueFormat = ValueFormat.TIERED,
    ) -> tuple[PrefixWalk, RouteState | None]:
        if not blocks and not (state and state.pods):
            return PrefixWalk({}), None
        keys, args = script_input(
            model, blocks, candidates, pod_started_at, start_keys, state, value_format
        )
        return walk_reply(WALK(client, keys, args), state, value_format)

    async def read_async(
        self,
        client: redis.asyncio.Redis,
        model: str,
        blocks: Sequence[int],
        candidates: Set[str] | None,
        pod_started_at: Mapping[str, int],
        start_keys: StartKeys = NO_START_KEYS,
        state: StateRequest | None = None,
        value_format: ValueFormat = ValueFormat.TIERED,
    ) -> tuple[PrefixWalk, RouteState | None]:
        """`read` through an asyncio client: the same script, input and reply."""
        if not blocks and not (state and state.pods):
            return PrefixWalk({}), None
        keys, args = script_input(
            model, blocks, candidates, pod_started_at, start_keys, state, value_format
        )
        return walk_reply(await WALK.call_async(client, keys, args), state, value_format)


INDEX_READER = IndexReader()


@dataclass(frozen=True, slots=True)
class RoutingRead:
    """What one round trip gave a routing decision: the scores, the request's block hashes,
    and the routing state when it was asked for."""

    result: ScoreResult
    blocks: list[int]
    state: RouteState | None


def score_request(
    client: redis.Redis,
    model: str,
    token_ids: Sequence[int],
    candidates: Set[str] | None,
    pod_started_at: Mapping[str, int],
    weights: TierWeights,
    block_size: int = DEFAULT_BLOCK_SIZE,
    max_blocks: int = DEFAULT_MAX_BLOCKS,
    reader: PrefixReader = INDEX_READER,
    start_keys: StartKeys = NO_START_KEYS,
    value_format: ValueFormat = ValueFormat.TIERED,
) -> ScoreResult:
    """From token ids to an explained result: hash the blocks, read the index (and the pods'
    `start_keys`) once, score. The result carries the time each step took."""
    return read_for_routing(
        client,
        model,
        token_ids,
        candidates,
        pod_started_at,
        weights,
        block_size=block_size,
        max_blocks=max_blocks,
        reader=reader,
        start_keys=start_keys,
        value_format=value_format,
    ).result


def read_for_routing(
    client: redis.Redis,
    model: str,
    token_ids: Sequence[int],
    candidates: Set[str] | None,
    pod_started_at: Mapping[str, int],
    weights: TierWeights,
    block_size: int = DEFAULT_BLOCK_SIZE,
    max_blocks: int = DEFAULT_MAX_BLOCKS,
    reader: PrefixReader = INDEX_READER,
    start_keys: StartKeys = NO_START_KEYS,
    state: StateRequest | None = None,
    value_format: ValueFormat = ValueFormat.TIERED,
) -> RoutingRead:
    """`score_request`, plus the routing `state` read in the same round trip."""
    started = perf_counter()
    blocks = block_hashes(token_ids, block_size, max_blocks)
    hashed = perf_counter()
    walk, route_state = reader.read(
        client, model, blocks, candidates, pod_started_at, start_keys, state, value_format
    )
    return _scored(walk, route_state, blocks, weights, started, hashed)


async def read_for_routing_async(
    client: redis.asyncio.Redis,
    model: str,
    token_ids: Sequence[int],
    candidates: Set[str] | None,
    pod_started_at: Mapping[str, int],
    weights: TierWeights,
    block_size: int = DEFAULT_BLOCK_SIZE,
    max_blocks: int = DEFAULT_MAX_BLOCKS,
    start_keys: StartKeys = NO_START_KEYS,
    state: StateRequest | None = None,
    value_format: ValueFormat = ValueFormat.TIERED,
) -> RoutingRead:
    """`read_for_routing` with `IndexReader` through an asyncio client (one round trip)."""
    started = perf_counter()
    blocks = block_hashes(token_ids, block_size, max_blocks)
    hashed = perf_counter()
    walk, route_state = await INDEX_READER.read_async(
        client, model, blocks, candidates, pod_started_at, start_keys, state, value_format
    )
    return _scored(walk, route_state, blocks, weights, started, hashed)


def _scored(
    walk: PrefixWalk,
    route_state: RouteState | None,
    blocks: list[int],
    weights: TierWeights,
    started: float,
    hashed: float,
) -> RoutingRead:
    read = perf_counter()
    result = score_walk(walk, len(blocks), weights)
    done = perf_counter()
    result.timings = Timings(
        hash_ms=(hashed - started) * 1000,
        read_ms=(read - hashed) * 1000,
        score_ms=(done - read) * 1000,
    )
    return RoutingRead(result, blocks, route_state)


def script_input(
    model: str,
    blocks: Sequence[int],
    candidates: Set[str] | None,
    pod_started_at: Mapping[str, int],
    start_keys: StartKeys,
    state: StateRequest | None = None,
    value_format: ValueFormat = ValueFormat.TIERED,
) -> tuple[list[str], list[bytes]]:
    """KEYS and ARGV of prefix_walk.lua for the request's `blocks` (the one place that builds
    them): no KEYS, and the script's lists packed as its one argument (see its header). Start
    times of non-candidates are left out: those owners are dropped before freshness
    matters."""
    keys = block_keys(model, blocks)
    if candidates is None:
        args, pods = ["0"], pod_started_at.keys() | start_keys.keys()
    else:
        args, pods = ["1"], candidates
    args.append(str(len(keys)))
    args += _RESIDENCY_ARGS if value_format is ValueFormat.LEGACY else ("", "", "")
    args.append(str(len(pods)))
    for pod in pods:
        started_at = pod_started_at.get(pod)
        pod_keys = start_keys.get(pod, ())
        args += (pod, "" if started_at is None else str(started_at), str(len(pod_keys)))
        keys += pod_keys
    if state and state.pods:
        now = "" if state.now_ms is None else str(state.now_ms)
        args += (str(len(state.pods)), now, str(state.in_flight_window_ms), *state.pods)
        for pod in state.pods:
            keys += state_keys(pod)
        keys += (speculative_key(model), speculative_groups_key(model))
    return [], [_PACK((keys, args))]


def walk_reply(
    reply: list[Any],
    state: StateRequest | None = None,
    value_format: ValueFormat = ValueFormat.TIERED,
) -> tuple[PrefixWalk, RouteState | None]:
    """Turn prefix_walk.lua's flat reply back into a PrefixWalk (no medium arrives as None)
    and the routing state."""
    n_non_candidates, n_stale, n_pods = reply[0], reply[1], reply[2]
    at = 3 + n_non_candidates + n_stale
    non_candidates = frozenset(reply[3 : 3 + n_non_candidates])
    stale = frozenset(reply[3 + n_non_candidates : at])
    runs: dict[str, tuple[MediaRun, ...]] = {}
    held: dict[str, HeldMedia] | None = {} if value_format is ValueFormat.LEGACY else None
    for _ in range(n_pods):
        end = at + 2 + 2 * reply[at + 1]
        pairs = iter(reply[at + 2 : end])
        pod = reply[at]
        runs[pod] = tuple(zip(pairs, pairs, strict=True))
        at = end
        if held is not None:
            pod_held: dict[str | None, tuple[Span, ...]] = {}
            n_media, at = reply[at], at + 1
            for _medium in range(n_media):
                medium, n_spans = reply[at] or None, reply[at + 1]
                pairs = iter(reply[at + 2 : at + 2 + 2 * n_spans])
                pod_held[medium] = tuple(zip(pairs, pairs, strict=True))
                at += 2 + 2 * n_spans
            held[pod] = pod_held
    walk = PrefixWalk(runs, non_candidates, stale, held)
    if not (state and state.pods):
        return walk, None
    now_ms, at = int(reply[at]), at + 1
    pods: dict[str, RawPodState] = {}
    # Per pod: the queue fields, the in-flight count, the load fields (RawPodState's fields in
    # its order, given by position: this runs for every candidate of every decision), then its
    # spans.
    in_flight_at = len(QUEUE_FIELDS)
    spans_at = in_flight_at + 1 + len(LOAD_FIELDS)
    for pod in state.pods:
        n_spans = reply[at + spans_at]
        speculative: tuple[int, ...] = ()
        if n_spans:
            spans = iter(reply[at + spans_at + 1 : at + spans_at + 1 + 2 * n_spans])
            speculative = tuple(
                chain.from_iterable(
                    range(start, start + length) for start, length in zip(spans, spans, strict=True)
                )
            )
        pods[pod] = RawPodState(
            *reply[at : at + in_flight_at],
            int(reply[at + in_flight_at]),
            *reply[at + in_flight_at + 1 : at + spans_at],
            speculative,
        )
        at += spans_at + 1 + 2 * n_spans
    return walk, RouteState(now_ms, pods)


def _residency_args() -> tuple[str, str, str]:
    """The legacy walk's residency key layout for prefix_walk.lua: the media SET key is the
    first part followed by the pod; a residency ZSET key is the second part, the pod, the
    third part, the medium (`scoring.keys` stays the one source of the layout)."""
    media_prefix = pod_media_key("\0").partition("\0")[0]
    before_pod, _, rest = residency_key("\0", "\1").partition("\0")
    between, _, after = rest.partition("\1")
    if after:
        raise AssertionError("a residency key ends with its medium")
    return media_prefix, before_pod, between


_RESIDENCY_ARGS = _residency_args()


def _baseline_held(
    client: redis.Redis, blocks: Sequence[int], walk: PrefixWalk
) -> dict[str, HeldMedia]:
    """Per pod of the walk, the residency's media of its matched blocks: the media SETs, then
    one ZMSCORE per pod and medium (two more round trips, only for the legacy format)."""
    matched = {pod: sum(count for _m, count in runs) for pod, runs in walk.runs.items()}
    if not matched:
        return {}
    pipeline = client.pipeline(transaction=False)
    for pod in matched:
        pipeline.smembers(pod_media_key(pod))
    pod_media = {pod: sorted(media) for pod, media in zip(matched, pipeline.execute(), strict=True)}
    wanted = [(pod, medium) for pod, media in pod_media.items() for medium in media]
    for pod, medium in wanted:
        members = [str(block) for block in blocks[: matched[pod]]]
        pipeline.zmscore(residency_key(pod, medium), members)
    held: dict[str, dict[str | None, tuple[Span, ...]]] = {pod: {} for pod in matched}
    for (pod, medium), scores in zip(wanted, pipeline.execute() if wanted else [], strict=True):
        found = spans(i for i, score in enumerate(scores) if score is not None)
        if found:
            held[pod][medium or None] = found
    return dict(held)


def _baseline_state(state: StateRequest, walk: PrefixWalk, replies: list[Any]) -> RouteState:
    """The routing state from the baseline's pipeline replies, computed as the script does."""
    at = 0
    if state.now_ms is None:
        seconds, micros = replies[0]
        now_ms, at = seconds * 1000 + micros // 1000, 1
    else:
        now_ms = state.now_ms
    since = now_ms - state.in_flight_window_ms
    # The blocks' groups and the groups follow the pods' keys (none for a request without
    # blocks).
    pod_replies, speculative = (
        replies[at : at + 3 * len(state.pods)],
        replies[at + 3 * len(state.pods) :],
    )
    block_groups, groups = speculative if speculative else ([], {})
    entries = [speculative_entries(groups.get(group)) for group in block_groups]
    matched = {pod: sum(count for _m, count in runs) for pod, runs in walk.runs.items()}
    pods: dict[str, RawPodState] = {}
    for i, pod in enumerate(state.pods):
        queue, in_flight, load = pod_replies[3 * i : 3 * i + 3]
        pods[pod] = RawPodState(
            **dict(zip(QUEUE_FIELDS, queue, strict=True)),
            in_flight=sum(1 for _member, end in in_flight if end > since),
            **dict(zip(LOAD_FIELDS, load, strict=True)),
            speculative=speculative_positions(entries, matched, pod, now_ms),
        )
    return RouteState(now_ms, pods)
