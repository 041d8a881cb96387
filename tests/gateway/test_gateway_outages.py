"""What the gateway does when kvadmin cannot decide: the picker down (the shipped config
fails open to Envoy's round robin), Redis down or a decision past its deadline (a degraded
choice, counted, the request served)."""

import json
import time

import pytest

from kvadmin.gateway.protocol import DECISION_HEADER
from kvadmin.redis_server import RedisServer, free_port
from scoring.keys import DECISIONS_KEY
from tests.index import MODEL
from tests.waiting import patient, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_with_the_picker_down_envoy_balances_on_its_own(gateway_of, redis_client) -> None:
    """failure_mode_allow: true (deploy/envoy/envoy.yaml): requests still reach the pods."""
    gateway = gateway_of(2, pickers=0, picker_addresses=[f"127.0.0.1:{free_port()}"])
    served = set()
    for n in range(4):
        status, headers, raw = gateway.post("/v1/completions", {"model": MODEL, "prompt": f"p{n}"})
        assert status == 200, raw
        assert DECISION_HEADER not in headers
        served.add(json.loads(raw)["kvadmin"]["pod"])
    assert served == set(gateway.pods.values())  # round robin over both
    assert redis_client.xlen(DECISIONS_KEY) == 0


def test_failing_closed_answers_the_client_an_error(gateway_of) -> None:
    """The other choice of failure_mode_allow: no routing without the picker."""
    gateway = gateway_of(
        1, pickers=0, picker_addresses=[f"127.0.0.1:{free_port()}"], failure_mode_allow=False
    )
    status, _, _ = gateway.post("/v1/completions", {"model": MODEL, "prompt": "hi"})
    assert status >= 500


def test_with_redis_down_choices_are_degraded_and_counted(gateway_of, picker_env) -> None:
    """The picker's own Redis stops after one good decision: later requests are still served,
    by the least recently routed pod, without waiting for Redis, and counted."""
    own = RedisServer().start()
    try:
        gateway = gateway_of(3, env=picker_env | {"REDIS_URL": own.url})
        picker = gateway.pickers[0]
        assert gateway.post("/v1/completions", {"model": MODEL, "prompt": "hi"})[0] == 200
        own.stop()
        served, started = [], time.monotonic()
        for n in range(3):
            status, headers, raw = gateway.post(
                "/v1/completions", {"model": MODEL, "prompt": f"while Redis is out {n}"}
            )
            assert status == 200, raw
            assert DECISION_HEADER not in headers
            served.append(json.loads(raw)["kvadmin"]["pod"])
        assert picker.counter("kvadmin_picker_degraded", reason="redis") == 3
        assert len(set(served)) == 3  # least recently routed: each pod in turn
        assert picker.counter("kvadmin_picker_requests", answer="degraded") == 3
        assert time.monotonic() - started < patient(30)  # no request waited for Redis to come back
    finally:
        own.stop()


def test_past_the_deadline_the_choice_is_degraded(gateway_of, picker_env, redis_client) -> None:
    """A deadline no decision can meet (a microsecond): every request is served by a
    degraded choice, counted as such. The late decisions are not cancelled (a Redis command
    cancelled in flight drops its connection): they end, counted, and are dropped. (The bound
    in flight is raised from the one so tiny a deadline gives: a late decision still ending
    would make the next request "busy".)"""
    tiny = {
        "KVADMIN_PICKER_DECISION_DEADLINE_SECONDS": "1e-6",
        "KVADMIN_PICKER_MAX_DECISIONS_IN_FLIGHT": "100",
    }
    gateway = gateway_of(2, env=picker_env | tiny)
    picker = gateway.pickers[0]
    for n in range(2):
        status, _, raw = gateway.post("/v1/completions", {"model": MODEL, "prompt": f"late {n}"})
        assert status == 200, raw
    assert picker.counter("kvadmin_picker_degraded", reason="deadline") == 2
    wait_until(
        lambda: picker.counter("kvadmin_picker_late_decisions") == 2,
        what="the late decisions to end",
    )
    assert redis_client.xlen(DECISIONS_KEY) == 0
