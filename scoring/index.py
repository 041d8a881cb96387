"""Reading the block index from Redis for one scoring call, in one round trip (SPEC 2.4, 5.8).

Two readers give the same `PrefixWalk` for every index:
- `BaselineIndexReader` reads the way kthena does: one pipeline with HGETALL per block key,
  every owner's value parsed client side, then `walk_prefix`. Kept as the reference and the
  benchmark baseline.
- `IndexReader` runs the walk inside Redis (`prefix_walk.lua`): it stops at the first block that
  leaves no pod matching, reads later blocks only for pods still matching, and returns only the
  runs of media per pod plus the dropped pods, so far less crosses the wire and far less is
  parsed in Python.

The script reads many keys, so on a Redis Cluster it needs all block keys of a model in one
slot, which kthena's key layout does not give; `BaselineIndexReader` works there unchanged.
"""

from collections.abc import Mapping, Sequence, Set
from pathlib import Path
from time import perf_counter
from types import MappingProxyType
from typing import Any, Protocol

import redis
from redis.commands.core import Script

from scoring.hashing import DEFAULT_BLOCK_SIZE, DEFAULT_MAX_BLOCKS, block_hashes
from scoring.keys import block_key, block_keys
from scoring.score import MediaRun, PrefixWalk, ScoreResult, Timings, score_walk, walk_prefix
from scoring.values import parse_value
from scoring.weights import TierWeights

_WALK_LUA = (Path(__file__).parent / "prefix_walk.lua").read_text()


StartKeys = Mapping[str, Sequence[str]]
"""Per pod, hashes whose `started_at` field (unix seconds) is a start of the pod, one per
stream (kvadmin's stream status): a reader takes them in the same round trip as the blocks,
and the latest start, with the caller's `pod_started_at`, is the pod's (SPEC 2.4 step 1)."""
NO_START_KEYS: StartKeys = MappingProxyType({})


class PrefixReader(Protocol):
    """What `score_request` needs of an index reader."""

    def walk(
        self,
        client: redis.Redis,
        model: str,
        blocks: Sequence[int],
        candidates: Set[str] | None,
        pod_started_at: Mapping[str, int],
        start_keys: StartKeys = NO_START_KEYS,
    ) -> PrefixWalk:
        """Walk the request's `blocks` of `model` over the index (one round trip)."""
        ...


class BaselineIndexReader:
    """kthena's way: fetch every block's owners, parse every value, walk in Python."""

    def walk(
        self,
        client: redis.Redis,
        model: str,
        blocks: Sequence[int],
        candidates: Set[str] | None,
        pod_started_at: Mapping[str, int],
        start_keys: StartKeys = NO_START_KEYS,
    ) -> PrefixWalk:
        if not blocks:
            return PrefixWalk({})
        pipeline = client.pipeline(transaction=False)
        for block in blocks:
            pipeline.hgetall(block_key(model, block))
        starts = [(pod, key) for pod, pod_keys in start_keys.items() for key in pod_keys]
        for _pod, key in starts:
            pipeline.hget(key, "started_at")
        replies = pipeline.execute()
        owners = {
            block: {pod: parse_value(raw) for pod, raw in reply.items()}
            for block, reply in zip(blocks, replies[: len(blocks)], strict=True)
        }
        started = dict(pod_started_at)
        for (pod, _key), value in zip(starts, replies[len(blocks) :], strict=True):
            if value is not None:
                started[pod] = max(int(value), started.get(pod, int(value)))
        return walk_prefix(blocks, owners, candidates, started)


class IndexReader:
    """kvadmin's way: the walk runs server side (see the module docstring).

    The script is registered once and sent by SHA (EVALSHA); redis-py's `Script` loads it when
    a server answers NOSCRIPT (first use, restart, failover, SCRIPT FLUSH), so only the first
    call against a server takes extra round trips. The client must decode responses
    (`decode_responses=True`).
    """

    def __init__(self) -> None:
        self._script: Script | None = None

    def walk(
        self,
        client: redis.Redis,
        model: str,
        blocks: Sequence[int],
        candidates: Set[str] | None,
        pod_started_at: Mapping[str, int],
        start_keys: StartKeys = NO_START_KEYS,
    ) -> PrefixWalk:
        if not blocks:
            return PrefixWalk({})
        if self._script is None:
            self._script = client.register_script(_WALK_LUA)
        blocks_keys = block_keys(model, blocks)
        keys, args = _script_input(blocks_keys, candidates, pod_started_at, start_keys)
        return _decoded(self._script(keys, args, client))


INDEX_READER = IndexReader()


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
) -> ScoreResult:
    """From token ids to an explained result: hash the blocks, read the index (and the pods'
    `start_keys`) once, score. The result carries the time each step took."""
    started = perf_counter()
    blocks = block_hashes(token_ids, block_size, max_blocks)
    hashed = perf_counter()
    walk = reader.walk(client, model, blocks, candidates, pod_started_at, start_keys)
    read = perf_counter()
    result = score_walk(walk, len(blocks), weights)
    done = perf_counter()
    result.timings = Timings(
        hash_ms=(hashed - started) * 1000,
        read_ms=(read - hashed) * 1000,
        score_ms=(done - read) * 1000,
    )
    return result


def _script_input(
    keys: list[str],
    candidates: Set[str] | None,
    pod_started_at: Mapping[str, int],
    start_keys: StartKeys,
) -> tuple[list[str], list[str]]:
    """KEYS and ARGV of prefix_walk.lua for the request's block `keys`. Start times of
    non-candidates are left out: those owners are dropped before freshness matters."""
    if candidates is None:
        args, pods = ["0"], pod_started_at.keys() | start_keys.keys()
    else:
        args, pods = ["1"], candidates
    args.append(str(len(keys)))
    keys = list(keys)
    for pod in pods:
        started_at = pod_started_at.get(pod)
        pod_keys = start_keys.get(pod, ())
        args += (pod, "" if started_at is None else str(started_at), str(len(pod_keys)))
        keys += pod_keys
    return keys, args


def _decoded(reply: list[Any]) -> PrefixWalk:
    """Turn prefix_walk.lua's flat reply back into a PrefixWalk (no medium arrives as None)."""
    n_non_candidates, n_stale, n_pods = reply[0], reply[1], reply[2]
    at = 3 + n_non_candidates + n_stale
    non_candidates = frozenset(reply[3 : 3 + n_non_candidates])
    stale = frozenset(reply[3 + n_non_candidates : at])
    runs: dict[str, tuple[MediaRun, ...]] = {}
    for _ in range(n_pods):
        end = at + 2 + 2 * reply[at + 1]
        pairs = iter(reply[at + 2 : end])
        runs[reply[at]] = tuple(zip(pairs, pairs, strict=True))
        at = end
    return PrefixWalk(runs, non_candidates, stale)
