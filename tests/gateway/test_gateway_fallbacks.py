"""The endpoints after the first are the gateway's retries: a primary that refuses
connections sends the request to the first fallback, and the outcome names who served."""

import json

import pytest

from kvadmin.engines.models import Engine
from kvadmin.gateway.protocol import DECISION_HEADER, DESTINATION, SERVED
from kvadmin.redis_server import free_port
from kvadmin.routing import outcomes
from tests.gateway.conftest import logged
from tests.index import MODEL
from tests.routing.conftest import hold
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_refusing_primary_is_retried_on_the_first_fallback(gateway_of, redis_client) -> None:
    """`gone-0` is registered and holds the whole prompt in the index, so the decision names
    it first; nothing listens at its address. Envoy's retry goes to the next endpoint the
    picker named, and the outcome records that pod as the one that served."""
    dead = f"127.0.0.1:{free_port()}"
    token_ids = list(range(1000, 1000 + 16 * 8))
    gateway = gateway_of(2, extra_endpoints=(dead,))
    Engine.objects.create(
        pod="gone-0.default",
        model=MODEL,
        kind="vllm",
        events_endpoint="tcp://127.0.0.1:1",
        serve_address=dead,
    )
    hold(redis_client, "gone-0.default", token_ids, ["GPU"] * 8)
    status, headers, raw = gateway.post(
        "/v1/completions", {"model": MODEL, "prompt": token_ids, "max_tokens": 2}
    )
    assert status == 200, raw
    decision = logged(headers[DECISION_HEADER], redis_client)
    assert decision is not None and decision.chosen == "gone-0.default"
    served = json.loads(raw)["kvadmin"]["pod"]
    assert gateway.pods[headers[SERVED]] == served
    recorded = wait_until(
        lambda: outcomes.outcomes_of(redis_client, [decision.decision_id]).get(
            decision.decision_id
        ),
        what="the outcome",
    )
    assert recorded.served == served
    first_fallback = next(e.pod for e in decision.estimates if e.pod != decision.chosen)
    assert served == first_fallback


def test_without_a_failure_the_chosen_pod_serves(gateway_of, redis_client) -> None:
    gateway = gateway_of(3)
    status, headers, _ = gateway.post("/v1/completions", {"model": MODEL, "prompt": "hello"})
    assert status == 200
    decision = logged(headers[DECISION_HEADER], redis_client)
    assert decision is not None
    assert gateway.pods[headers[SERVED]] == decision.chosen
    assert DESTINATION not in headers  # a request header for Envoy, not an answer
