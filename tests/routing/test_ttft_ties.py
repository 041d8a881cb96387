"""Through the real service and Redis: a cold request that every pod prices alike goes to the
pod kvadmin routed the least work to lately (its in-flight requests, read in the decision's one
round trip), not where rendezvous hashing alone would put it."""

import time

import pytest

from scoring.choice import tie_break
from scoring.hashing import block_hashes
from scoring.keys import load_key, queue_key
from tests.index import MODEL
from tests.routing.conftest import PODS, request_tokens
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db


def test_a_tie_goes_to_the_pod_with_the_least_recent_work(post_score, engines, redis_client):
    cold = request_tokens(4, start=70_000)
    hashed = tie_break(block_hashes(cold)[0], PODS)
    idle = next(pod for pod in PODS if pod != hashed)
    busy = [pod for pod in PODS if pod != idle]
    idle_engine = {"running": "0", "waiting": "0", "kv_usage": "0.1"}
    for n, pod in enumerate(busy):  # routed work on the two others; their queues then drain
        assert post_score({"model": MODEL, "token_ids": request_tokens(2, n * 100), "pods": [pod]})[
            0
        ]
    wait_until(
        lambda: all(
            float(redis_client.hget(queue_key(pod), "busy_until_ms")) < time.time() * 1000
            for pod in busy
        ),
        what="the routed prefills to be over",
    )
    for pod in PODS:  # every engine reports the same idle load: the pods price alike
        redis_client.hset(load_key(pod), mapping=idle_engine | {"scraped_at": str(time.time())})

    status, answer = post_score({"model": MODEL, "token_ids": cold})

    assert status == 200 and answer["stale_loads"] == []
    assert len({round(e["cost_s"], 9) for e in answer["estimates"]}) == 1
    assert answer["chosen"] == idle != hashed
    assert answer["tie_break"] is False
    assert "least recent work (0.0 ms" in answer["reason"]
