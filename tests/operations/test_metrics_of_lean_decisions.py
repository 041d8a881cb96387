"""Decisions of the scoring API's lean path, made at once by concurrent gateways through the real
ASGI server, are each counted in the metrics: the decision metrics go to Redis as one script
call per decision (`recorder.Increments`), in the pipelined recording of the decision, and
/metrics and the dashboard's per-minute buckets show exactly what the answers said."""

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from kvadmin.api.models import ApiToken
from kvadmin.engines.models import Engine
from kvadmin.metrics.recorder import HITS_TTL_SECONDS
from scoring import keys
from tests.conftest import http_json
from tests.index import MODEL, block_tokens
from tests.operations.conftest import value

pytestmark = pytest.mark.django_db(transaction=True)

PODS = ("vllm-0.default", "vllm-1.default", "vllm-2.default")
DECISIONS = 12


@pytest.fixture
def fleet(index) -> None:
    """Three engines; vllm-0 holds blocks 0-5 (0-3 in GPU, 4-5 in CPU), vllm-1 block 0 in GPU."""
    for i, pod in enumerate(PODS):
        Engine.objects.create(pod=pod, model=MODEL, events_endpoint=f"tcp://127.0.0.1:{5557 + i}")
    index.store(PODS[0], range(0, 4), "GPU", at=time.time())
    index.store(PODS[0], range(4, 6), "CPU", at=time.time())
    index.store(PODS[1], range(0, 1), "GPU", at=time.time())


def test_every_concurrent_decision_is_counted_as_its_answer_says(
    asgi_server, fleet, redis_client, scrape
) -> None:
    _, token = ApiToken.issue("gateway")
    body = {"model": MODEL, "token_ids": [t for n in range(8) for t in block_tokens(n)]}
    with ThreadPoolExecutor(max_workers=6) as gateways:
        answers = list(
            gateways.map(
                lambda _: http_json(f"{asgi_server}/api/v1/score", body, token), range(DECISIONS)
            )
        )
    assert [status for status, _ in answers] == [200] * DECISIONS
    decided = [answer for _, answer in answers]
    chosen = Counter(answer["chosen"] for answer in decided)
    media: Counter[str] = Counter()
    for answer in decided:
        (held,) = [s for s in answer["scores"] if s["pod"] == answer["chosen"]] or [{"media": {}}]
        media.update(held["media"])

    samples = scrape()
    for pod, count in chosen.items():
        assert value(samples, "kvadmin_decisions_total", model=MODEL, pod=pod) == count
    assert value(samples, "kvadmin_requested_blocks_total", model=MODEL) == 8 * DECISIONS
    for medium, count in media.items():
        assert value(samples, "kvadmin_matched_blocks_total", model=MODEL, medium=medium) == count
    for histogram in ("kvadmin_kvcache_aware_match_ratio", "kvadmin_scoring_duration_seconds"):
        assert value(samples, f"{histogram}_count", model=MODEL) == DECISIONS
    ratio_sum = value(samples, "kvadmin_kvcache_aware_match_ratio_sum", model=MODEL)
    assert ratio_sum == pytest.approx(sum(a["longest_match"] / 8 for a in decided))

    buckets = redis_client.keys(f"{keys.HITS_KEY_PREFIX}*")  # the minute(s) they were made in
    minutes = [redis_client.hgetall(bucket) for bucket in buckets]
    assert sum(int(minute.get("decisions", 0)) for minute in minutes) == DECISIONS
    assert sum(int(minute.get("blocks", 0)) for minute in minutes) == 8 * DECISIONS
    for pod, count in chosen.items():
        assert sum(int(minute.get(f"p:{pod}", 0)) for minute in minutes) == count
    assert all(0 < redis_client.ttl(bucket) <= HITS_TTL_SECONDS for bucket in buckets)
