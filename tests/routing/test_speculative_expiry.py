"""Speculative entries last until ROUTING_SPECULATIVE_SECONDS after their request's predicted
prefill end, not after the routing: a request queued behind others keeps its blocks' entries
while it waits, and none outlives its blocks' store by more than the knob."""

import pytest

from scoring.hashing import block_hashes
from scoring.keys import queue_key, speculative_key
from tests.index import MODEL
from tests.routing.conftest import PODS, request_tokens
from tests.scoring.speculative_data import speculative_of

pytestmark = pytest.mark.django_db


def test_entries_expire_a_set_time_after_the_predicted_prefill_end(
    post_score, engines, redis_client, settings
) -> None:
    settings.KVADMIN = {"ROUTING_SPECULATIVE_SECONDS": 0.5}
    pod = PODS[0]
    ends = []
    for start in (0, 100_000):  # the second queues behind the first on the same pod
        request = request_tokens(190, start=start)  # ~0.2 s of prefill each
        _, answer = post_score({"model": MODEL, "token_ids": request, "pods": [pod]})
        end = float(redis_client.hget(queue_key(pod), "busy_until_ms"))
        block = block_hashes(request)[0]
        expiry = speculative_of(redis_client, pod)[block]
        assert expiry == pytest.approx(end + 500, abs=0.01)
        ends.append(end)
    assert ends[1] > ends[0]  # queued: its entries outlive the first request's
    seconds, micros = redis_client.time()
    now_ms = seconds * 1000 + micros / 1000
    ttl = redis_client.pttl(speculative_key(MODEL))
    assert ends[1] + 500 - now_ms - 50 <= ttl <= ends[1] + 500 - now_ms + 50
