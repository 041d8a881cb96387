"""The shipped Envoy sends the picker no header messages: a routed plain completion costs
its body and its response body (and the response's end), and a path the picker does not
route costs none; the request id and the served pod still reach the decision and outcome."""

import pytest
import redis

from kvadmin.gateway.protocol import DECISION_HEADER
from tests.gateway.conftest import logged
from tests.index import MODEL
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

SENT = "http.gateway.ext_proc.stream_msgs_sent"
RECEIVED = "http.gateway.ext_proc.stream_msgs_received"
"""The picker's answers (SENT: Envoy's messages to it)."""


def test_a_routed_request_costs_no_header_messages(gateway_of, redis_client: redis.Redis) -> None:
    gateway = gateway_of(2)
    body = {"model": MODEL, "prompt": "the cache holds the prefix " * 20, "max_tokens": 4}
    status, headers, raw = gateway.post("/v1/completions", body, {"x-request-id": "req-7"})
    assert status == 200, raw
    decision = logged(headers[DECISION_HEADER], redis_client)
    assert decision is not None and decision.request_id == "req-7"
    wait_until(
        lambda: gateway.pickers[0].counter("kvadmin_picker_outcomes", result="recorded") == 1,
        what="the outcome",
    )
    assert gateway.stat(SENT) <= 3
    before = gateway.stat(SENT)
    status, _, _ = gateway.post("/tokenize", {"model": MODEL, "prompt": "hi"})
    assert status == 200
    assert gateway.stat(SENT) == before
