"""A request through Envoy lands on the pod kvadmin's decision names; the decision is in the
log (which the live feed reads) with the delivered outcome from the pod's own answer."""

import json

import pytest
import redis

from kvadmin.gateway.protocol import DECISION_HEADER, SERVED
from kvadmin.routing import decisions, outcomes
from tests.gateway.conftest import logged
from tests.index import MODEL
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_completion_lands_on_the_decided_pod_and_its_outcome_is_recorded(
    gateway_of, redis_client: redis.Redis
) -> None:
    gateway = gateway_of(3)
    body = {"model": MODEL, "prompt": "the cache holds the prefix " * 40, "max_tokens": 4}
    status, headers, raw = gateway.post("/v1/completions", body, {"x-request-id": "req-1"})
    assert status == 200, raw
    answer = json.loads(raw)
    decision = logged(headers[DECISION_HEADER], redis_client)
    assert decision is not None and decision.request_id == "req-1"
    assert answer["kvadmin"]["pod"] == decision.chosen
    assert gateway.pods[headers[SERVED]] == decision.chosen
    assert decision.decision_id in [
        d.decision_id for d in decisions.recent(10, client=redis_client)
    ]
    recorded = wait_until(
        lambda: outcomes.outcomes_of(redis_client, [decision.decision_id]).get(
            decision.decision_id
        ),
        what="the picker to record the outcome",
    )
    usage = answer["usage"]
    assert recorded.prompt_tokens == usage["prompt_tokens"]
    assert recorded.cached_tokens == usage["prompt_tokens_details"]["cached_tokens"]
    assert recorded.ttft_ms is not None and recorded.ttft_ms > 0
    assert recorded.served is None  # the chosen pod served it


def test_a_chat_prefix_goes_back_to_the_pod_that_holds_it(gateway_of, redis_client) -> None:
    """The second turn of a conversation hits the blocks the first left (speculative entries
    and then the index): routed to the same pod, and the pod reports the hit."""
    gateway = gateway_of(3)
    messages = [{"role": "user", "content": "explain the prefix cache " * 60}]
    first = gateway.post("/v1/chat/completions", {"model": MODEL, "messages": messages})
    assert first[0] == 200
    second = gateway.post("/v1/chat/completions", {"model": MODEL, "messages": messages})
    assert second[0] == 200
    assert json.loads(second[2])["kvadmin"]["pod"] == json.loads(first[2])["kvadmin"]["pod"]
    assert json.loads(second[2])["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
