"""On any index and request, the Lua reader and the baseline reader score exactly like a plain
implementation written straight from compatibility.md 2.4: same pods, scores, sums, media and
drops."""

import re
from collections import Counter
from collections.abc import Mapping
from itertools import groupby

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scoring.index import BaselineIndexReader, IndexReader
from scoring.score import PodScore, ScoreResult, score_walk
from scoring.values import ValueFormat
from scoring.weights import TierWeights
from tests.conftest import examples
from tests.index import MODEL, VALUE_FORMATS, write_kthena_index

Index = dict[int, dict[str, str]]

PODS = ["vllm-0.default", "vllm-1.default", "sglang-0.prod", "a|b.ns", "ünï.ns", ""]
MEDIA = [None, "", "GPU", "CPU", "CPU_PINNED", " Gpu ", "DISK", "SHARED_STORAGE", "a|b", "x\x00y"]
TIMESTAMPS = st.one_of(
    st.integers(990, 1010).map(str),
    st.sampled_from(
        [
            "",
            "not-a-number",
            "+1005",
            "-3",
            "-4",
            "-0004",
            "0001005",
            "0000000000000000000995",
            "1e3",
            " 1005",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775808",
            "-9223372036854775809",
            "99999999999999999999",
            "1234567890123456",
            "9007199254740992",
            "9007199254740993",
        ]
    ),
)
START_TIMES = st.one_of(
    st.integers(990, 1010),
    st.sampled_from([0, -4, -(10**20), 10**20, 2**63, 1234567890123455, 2**53]),
)


def value_text(timestamp: str, medium: str | None) -> str:
    return timestamp if medium is None else f"{timestamp}|{medium}"


@st.composite
def indexes(draw: st.DrawFn) -> Index:
    """Few block hashes so requests repeat them; each pod writes from a small pool of values so
    that consecutive blocks often carry the same text, as when one event stores many blocks."""
    pods = draw(st.lists(st.sampled_from(PODS), min_size=1, max_size=5, unique=True))
    pools = {
        pod: draw(
            st.lists(
                st.builds(value_text, TIMESTAMPS, st.sampled_from(MEDIA)), min_size=1, max_size=3
            )
        )
        for pod in pods
    }
    index: Index = {}
    for block in range(draw(st.integers(1, 6))):
        owners = draw(st.lists(st.sampled_from(pods), unique=True))
        index[block] = {pod: draw(st.sampled_from(pools[pod])) for pod in owners}
    return index


weights_configs = st.dictionaries(
    st.sampled_from(["gpu", "cpu", "cpu_pinned", "disk", "shared_storage", "a|b"]),
    st.one_of(st.sampled_from([0.0, 1.0, 0.8, 0.1, 0.3]), st.floats(0.0, 1.0)),
)


def spec_scores(
    blocks: list[int],
    index: Index,
    candidates: set[str] | None,
    started: Mapping[str, int],
    weights: TierWeights,
) -> ScoreResult:
    """compatibility.md 2.4 read literally, with no code shared with scoring/ but the weight
    lookup."""

    def parsed(raw: str) -> tuple[int | None, str | None]:
        text, _, medium = raw.partition("|")
        seconds = int(text) if re.fullmatch(r"[+-]?[0-9]+", text) else None
        if seconds is not None and not -(2**63) <= seconds < 2**63:
            seconds = None
        return seconds, medium or None

    def stale(pod: str, raw: str) -> bool:
        seconds = parsed(raw)[0]
        return pod in started and seconds is not None and seconds <= started[pod]

    # 1. Drop non-candidates and stale owners, block by block.
    kept = [
        {
            pod: parsed(raw)[1]
            for pod, raw in index.get(block, {}).items()
            if (candidates is None or pod in candidates) and not stale(pod, raw)
        }
        for block in blocks
    ]
    # 2. Only pods owning B[0]; walk while some pod owns every block so far.
    matched: dict[str, list[str | None]] = {}
    if blocks:
        matched = {pod: [medium] for pod, medium in kept[0].items()}
        active = set(matched)
        for owners in kept[1:]:
            active = {pod for pod in active if pod in owners}
            if not active:
                break
            for pod in active:
                matched[pod].append(owners[pod])
    # 3.-4. s = w(B0), then s += w(Bi); score = int((s / n) * 100).
    pods = []
    for pod, media in matched.items():
        total = weights.weight_for(media[0])
        for medium in media[1:]:
            total += weights.weight_for(medium)
        runs = tuple((medium, len(list(same))) for medium, same in groupby(media))
        score = int((total / len(blocks)) * 100)
        pods.append(PodScore(pod, score, len(media), total, dict(Counter(media)), runs))
    # Dropped: owners of B[0] that would have scored, and pods cut short by a stale entry.
    first = index.get(blocks[0], {}) if blocks else {}
    non_candidates = {pod for pod in first if candidates is not None and pod not in candidates}
    dropped_stale = {
        pod for pod, raw in first.items() if pod not in non_candidates and stale(pod, raw)
    }
    for pod, media in matched.items():
        cut_at = blocks[len(media)] if len(media) < len(blocks) else None
        raw = index.get(cut_at, {}).get(pod) if cut_at is not None else None
        if raw is not None and stale(pod, raw):
            dropped_stale.add(pod)
    pods.sort(key=lambda scored: (-scored.score, scored.pod))
    return ScoreResult(
        n_blocks=len(blocks),
        longest_match=max((len(media) for media in matched.values()), default=0),
        pods=tuple(pods),
        dropped_non_candidates=tuple(sorted(non_candidates)),
        dropped_stale=tuple(sorted(dropped_stale)),
    )


@st.composite
def prefix_indexes(draw: st.DrawFn) -> tuple[list[int], Index]:
    """A request of distinct blocks and pods holding prefixes of it, as a fleet does: a value is
    kept for a run of blocks (one event) before the next, with an occasional gap."""
    blocks = list(range(draw(st.integers(1, 40))))
    index: Index = {block: {} for block in blocks}
    for pod in draw(st.lists(st.sampled_from(PODS), min_size=1, max_size=5, unique=True)):
        value = draw(st.builds(value_text, TIMESTAMPS, st.sampled_from(MEDIA)))
        for block in range(draw(st.integers(0, len(blocks)))):
            if draw(st.integers(0, 7)) == 0:
                value = draw(st.builds(value_text, TIMESTAMPS, st.sampled_from(MEDIA)))
            if draw(st.integers(0, 19)) != 0:
                index[block][pod] = value
    return blocks, index


UNWEIGHTED = TierWeights.from_config({"gpu": 1.0, "cpu": 1.0, "cpu_pinned": 1.0})
"""Every medium at 1.0: kthena main's scores, which count matched blocks."""


def assert_readers_follow_the_spec(
    client: redis.Redis,
    data: st.DataObject,
    blocks: list[int],
    index: Index,
    value_format: ValueFormat,
) -> None:
    """Under the legacy format the scores are kthena main's (every block 1) and the media the
    tiered values would name come from the residency (one medium per block and pod here)."""
    client.flushdb()  # the fixture empties the database once per test, not per example
    write_kthena_index(client, index, value_format=value_format)
    pods = sorted({pod for owners in index.values() for pod in owners} | {"never-owner.ns"})
    candidates = data.draw(st.none() | st.sets(st.sampled_from(pods)), label="candidates")
    started = data.draw(st.dictionaries(st.sampled_from(pods), START_TIMES), label="started")
    config = data.draw(weights_configs, label="weights")
    weights = TierWeights.from_config(config, data.draw(st.floats(0.0, 1.0), label="fallback"))

    legacy = value_format is ValueFormat.LEGACY
    expected = spec_scores(blocks, index, candidates, started, UNWEIGHTED if legacy else weights)
    for reader in (BaselineIndexReader(), IndexReader()):
        walk = reader.walk(client, MODEL, blocks, candidates, started, value_format=value_format)
        assert score_walk(walk, len(blocks), weights) == expected, type(reader).__name__


EXAMPLES = settings(
    max_examples=examples(100),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.mark.parametrize("value_format", VALUE_FORMATS)
@EXAMPLES
@given(index=indexes(), data=st.data())
def test_readers_score_random_indexes_as_the_spec_says(
    redis_client: redis.Redis, index: Index, data: st.DataObject, value_format: ValueFormat
) -> None:
    blocks = data.draw(st.lists(st.integers(0, len(index)), max_size=12), label="blocks")
    assert_readers_follow_the_spec(redis_client, data, blocks, index, value_format)


@pytest.mark.parametrize("value_format", VALUE_FORMATS)
@EXAMPLES
@given(request=prefix_indexes(), data=st.data())
def test_readers_score_shared_prefixes_as_the_spec_says(
    redis_client: redis.Redis,
    request: tuple[list[int], Index],
    data: st.DataObject,
    value_format: ValueFormat,
) -> None:
    blocks, index = request
    assert_readers_follow_the_spec(redis_client, data, blocks, index, value_format)
