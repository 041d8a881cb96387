"""After real scoring (the scoring service over an index written by the applier) /metrics
shows kthena's match-ratio histogram per model, the scoring latencies, the decisions per
chosen pod and the matched blocks per medium.

The decision is recorded here through `recorder.record_decision`, the call the decision log is
to make in the pipeline of its XADD (scored with record=False so it is counted once)."""

import time

import pytest

from kvadmin.engines.models import Engine
from kvadmin.metrics import recorder
from kvadmin.routing.service import score
from tests.index import MODEL, block_tokens
from tests.operations.conftest import value

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet_index(index) -> None:
    """vllm-0 holds blocks 0-3 in GPU and 4-5 in CPU; vllm-1 holds block 0 in GPU."""
    for pod in ("vllm-0.default", "vllm-1.default"):
        Engine.objects.create(pod=pod, model=MODEL, kind="vllm", events_endpoint="tcp://h:5557")
    index.store("vllm-0.default", range(0, 4), "GPU", at=time.time())
    index.store("vllm-0.default", range(4, 6), "CPU", at=time.time())
    index.store("vllm-1.default", range(0, 1), "GPU", at=time.time())


def _decide(redis_client) -> None:
    decision = score(MODEL, token_ids=[t for n in range(8) for t in block_tokens(n)], record=False)
    assert decision.chosen == "vllm-0.default"
    recorder.record_decision(redis_client, decision)


def test_the_match_ratio_uses_kthenas_buckets(fleet_index, redis_client, scrape) -> None:
    """6 of 8 blocks matched: 0.75 lands in le="0.75" and every bucket above it."""
    _decide(redis_client)
    samples = scrape()

    buckets = {
        le: value(samples, "kvadmin_kvcache_aware_match_ratio_bucket", model=MODEL, le=le)
        for le in ("0.0", "0.1", "0.25", "0.5", "0.75", "0.9", "0.95", "0.99", "1.0", "+Inf")
    }
    assert buckets == {
        "0.0": 0,
        "0.1": 0,
        "0.25": 0,
        "0.5": 0,
        "0.75": 1,
        "0.9": 1,
        "0.95": 1,
        "0.99": 1,
        "1.0": 1,
        "+Inf": 1,
    }
    assert value(samples, "kvadmin_kvcache_aware_match_ratio_sum", model=MODEL) == 0.75


def test_decisions_and_matched_blocks_carry_pod_and_medium(
    fleet_index, redis_client, scrape
) -> None:
    _decide(redis_client)
    _decide(redis_client)
    samples = scrape()

    assert value(samples, "kvadmin_decisions_total", model=MODEL, pod="vllm-0.default") == 2
    assert value(samples, "kvadmin_matched_blocks_total", model=MODEL, medium="GPU") == 8
    assert value(samples, "kvadmin_matched_blocks_total", model=MODEL, medium="CPU") == 4
    assert value(samples, "kvadmin_requested_blocks_total", model=MODEL) == 16


def test_scoring_latencies_are_histograms_per_model(fleet_index, redis_client, scrape) -> None:
    """Token ids need no tokenization: only the index read and the total are observed."""
    _decide(redis_client)
    samples = scrape()

    assert value(samples, "kvadmin_kvcache_aware_redis_duration_seconds_count", model=MODEL) == 1
    assert value(samples, "kvadmin_scoring_duration_seconds_count", model=MODEL) == 1
    total = value(samples, "kvadmin_scoring_duration_seconds_sum", model=MODEL)
    assert 0 < total < 1
    tokenize = "kvadmin_kvcache_aware_tokenize_duration_seconds_count"
    assert value(samples, tokenize, model=MODEL) is None


def test_errors_are_counted_by_stage(redis_client, scrape) -> None:
    recorder.record_scoring_error(redis_client, MODEL, "tokenize")
    samples = scrape()

    assert value(samples, "kvadmin_kvcache_aware_errors_total", model=MODEL, stage="tokenize") == 1
