"""Bodies the picker cannot route are answered at once (400, 413, 404), and nothing is
recorded or sent to a pod."""

import json

import pytest

from scoring.keys import DECISIONS_KEY
from tests.index import MODEL
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

REFUSED = [
    (b"this is not JSON", 400),
    (b'{"model": "Qwen/Qwen3-8B", "prompt": "unterminated', 400),
    (b"[1, 2, 3]", 400),
    (json.dumps({"prompt": "no model"}).encode(), 400),
    (json.dumps({"model": MODEL}).encode(), 400),
    (json.dumps({"model": MODEL, "prompt": [1, -2]}).encode(), 400),
    (b"[" * 1000 + b"]" * 1000, 400),
    (json.dumps({"model": MODEL, "prompt": "x" * 5000}).encode(), 413),
    (json.dumps({"model": "nobody/serves-this", "prompt": "hi"}).encode(), 404),
]


def test_a_body_it_cannot_route_is_refused_and_nothing_recorded(
    gateway_of, picker_env, redis_client
) -> None:
    gateway = gateway_of(2, env=picker_env | {"KVADMIN_PICKER_MAX_BODY_BYTES": "4096"})
    picker = gateway.pickers[0]
    for body, status in REFUSED:
        before = picker.counter("kvadmin_picker_refused", status=str(status))
        answered, _, raw = gateway.post("/v1/completions", body)
        assert answered == status, (body[:60], raw)
        assert "error" in json.loads(raw)
        assert picker.counter("kvadmin_picker_refused", status=str(status)) == before + 1
    assert redis_client.xlen(DECISIONS_KEY) == 0
    assert gateway.stat("cluster.pods.upstream_rq_total") == 0


def test_a_body_over_grpcs_default_message_size_is_the_pickers_to_refuse(
    gateway_of, picker_env, redis_client
) -> None:
    """A limit above gRPC's default message size (4 MiB): a body between the two reaches
    the picker and is answered 413 by it, not refused by gRPC (which Envoy's fail-open took
    for a picker failure: the request passed unrouted to a pod)."""
    gateway = gateway_of(
        2, env=picker_env | {"KVADMIN_PICKER_MAX_BODY_BYTES": str(6 * 1024 * 1024)}
    )
    body = json.dumps({"model": MODEL, "prompt": "x" * (6 * 1024 * 1024)}).encode()
    answered, _, raw = gateway.post("/v1/completions", body)
    assert answered == 413, raw[:200]
    assert gateway.pickers[0].counter("kvadmin_picker_refused", status="413") == 1
    assert gateway.stat("cluster.pods.upstream_rq_total") == 0
    assert redis_client.xlen(DECISIONS_KEY) == 0


def test_a_shed_request_is_refused_before_anything_is_recorded(
    gateway_of, picker_env, redis_client
) -> None:
    """Shedding on (any predicted wait is too long): the first long prompt finds the pod
    idle and is routed; the second finds it busy with the first's predicted prefill (tens of
    seconds for this many tokens) and is answered 429, with no decision logged and no pod
    queued for it."""
    gateway = gateway_of(
        1, env=picker_env | {"KVADMIN_PICKER_SHED_WAIT_SECONDS": "1e-9"}, max_model_len=262_144
    )
    long = {"model": MODEL, "prompt": "tok " * 200_000}
    first = gateway.post("/v1/completions", long)
    assert first[0] == 200, first[2]
    assert gateway.pickers[0].counter("kvadmin_picker_requests", answer="routed") == 1
    # Recorded once the gateway has its answer: moments after it, not before.
    wait_until(lambda: redis_client.xlen(DECISIONS_KEY) == 1, what="the decision's record")
    status, _, raw = gateway.post("/v1/completions", long | {"prompt": "tok " * 200_001})
    assert status == 429, raw
    assert json.loads(raw)["error"]["type"] == "overloaded"
    assert gateway.pickers[0].counter("kvadmin_picker_refused", status="429") == 1
    assert redis_client.xlen(DECISIONS_KEY) == 1
    assert gateway.stat("cluster.pods.upstream_rq_total") == 1
