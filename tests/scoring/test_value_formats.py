"""kthena's score vectors through both index readers, in both value formats (compatibility.md 2.4,
2.7): tiered indexes score as kthena with PR #1293 does, legacy ones as kthena main does (every
matched block 1, since its values name no medium), and both explain each pod by the same media,
read from the values or from kvadmin's residency."""

from typing import Any

import pytest
import redis

from scoring.index import BaselineIndexReader, IndexReader, PrefixReader
from scoring.keys import block_value
from scoring.score import ScoreResult, score_walk
from scoring.values import ValueFormat
from scoring.weights import TierWeights
from tests.index import MODEL, VALUE_FORMATS, write_kthena_index
from tests.scoring.vectors import KTHENA, named

WRITTEN_AT = 1703123456
READERS = [
    pytest.param(BaselineIndexReader(), id="baseline"),
    pytest.param(IndexReader(), id="lua"),
]


def _scored(
    client: redis.Redis,
    reader: PrefixReader,
    value_format: ValueFormat,
    blocks: list[int],
    owners: dict[int, dict[str, str]],
    weights: TierWeights,
) -> ScoreResult:
    client.flushdb()
    write_kthena_index(client, owners, value_format=value_format)
    walk = reader.walk(client, MODEL, blocks, None, {}, value_format=value_format)
    return score_walk(walk, len(blocks), weights)


def _unweighted(result: ScoreResult) -> dict[str, int]:
    """kthena main's scores of the same matches: matched blocks over hashed blocks."""
    return {pod.pod: int((pod.matched_blocks / result.n_blocks) * 100) for pod in result.pods}


@pytest.mark.parametrize("value_format", VALUE_FORMATS)
@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("vector", KTHENA["unweighted_scores"])
def test_unweighted_vectors_score_alike_in_both_formats(
    redis_client: redis.Redis, reader: PrefixReader, value_format: ValueFormat, vector: dict
) -> None:
    blocks = list(range(vector["total"]))
    owners = {block: {"pod": str(WRITTEN_AT)} for block in blocks[: vector["matched"]]}
    result = _scored(redis_client, reader, value_format, blocks, owners, TierWeights())
    assert result.scores == {"pod": vector["score"]}


@pytest.mark.parametrize("value_format", VALUE_FORMATS)
@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("table", named(KTHENA["score_tables"]))
def test_kthenas_tables_score_alike_in_both_formats(
    redis_client: redis.Redis, reader: PrefixReader, value_format: ValueFormat, table: dict
) -> None:
    owners = {
        int(block): {pod: str(WRITTEN_AT) for pod in pods}
        for block, pods in table["owners"].items()
    }
    result = _scored(redis_client, reader, value_format, table["blocks"], owners, TierWeights())
    assert result.scores == table["expected"]


def _check_weighted(
    client: redis.Redis,
    reader: PrefixReader,
    value_format: ValueFormat,
    blocks: list[int],
    owners: dict[int, dict[str, str]],
    weights: TierWeights,
    expected: dict[str, Any],
) -> None:
    tiered = _scored(client, BaselineIndexReader(), ValueFormat.TIERED, blocks, owners, weights)
    result = _scored(client, reader, value_format, blocks, owners, weights)
    if value_format is ValueFormat.TIERED:
        assert result.scores == expected
    else:
        assert result.scores == _unweighted(tiered)
    assert {pod.pod: pod.media_runs for pod in result.pods} == {
        pod.pod: pod.media_runs for pod in tiered.pods
    }


@pytest.mark.parametrize("value_format", VALUE_FORMATS)
@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("vector", KTHENA["weighted_scores"])
def test_weighted_vectors_in_both_formats(
    redis_client: redis.Redis, reader: PrefixReader, value_format: ValueFormat, vector: dict
) -> None:
    media = {weight: f"TIER-{index}" for index, weight in enumerate(sorted(set(vector["weights"])))}
    weights = TierWeights.from_config({medium: weight for weight, medium in media.items()})
    blocks = list(range(vector["total"]))
    owners = {
        block: {"pod": block_value(WRITTEN_AT, media[weight])}
        for block, weight in zip(blocks, vector["weights"], strict=False)
    }
    expected = {"pod": vector["score"]}
    _check_weighted(redis_client, reader, value_format, blocks, owners, weights, expected)


@pytest.mark.parametrize("value_format", VALUE_FORMATS)
@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("table", named(KTHENA["weighted_tables"]))
def test_kthenas_weighted_tables_in_both_formats(
    redis_client: redis.Redis, reader: PrefixReader, value_format: ValueFormat, table: dict
) -> None:
    owners = {
        int(block): {pod: block_value(WRITTEN_AT, medium) for pod, medium in pods.items()}
        for block, pods in table["owners"].items()
    }
    weights = TierWeights.from_config(table["weights"])
    blocks = table["blocks"]
    _check_weighted(redis_client, reader, value_format, blocks, owners, weights, table["expected"])


@pytest.mark.parametrize("reader", READERS)
def test_a_legacy_block_held_in_several_media_is_explained_by_the_best(
    redis_client: redis.Redis, reader: PrefixReader
) -> None:
    """The residency holds block 2 in GPU and CPU: the tiered value would name GPU."""
    owners = {1: {"p": f"{WRITTEN_AT}|CPU"}, 2: {"p": f"{WRITTEN_AT}|CPU"}}
    write_kthena_index(redis_client, owners, value_format=ValueFormat.LEGACY)
    write_kthena_index(
        redis_client, {2: {"p": f"{WRITTEN_AT}|GPU"}}, value_format=ValueFormat.LEGACY
    )
    walk = reader.walk(redis_client, MODEL, [1, 2, 3], None, {}, value_format=ValueFormat.LEGACY)
    result = score_walk(walk, 3, TierWeights())
    assert result.pods[0].media_runs == (("CPU", 1), ("GPU", 1))
    assert result.scores == {"p": 66}
