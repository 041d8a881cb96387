"""The subset hint (`envoy.lb.subset_hint` metadata): only those endpoints; none of them
eligible is a 503. The test's Envoy lets a request header set the hint, as a gateway's own
filters do."""

import json

import pytest

from scoring.keys import DECISIONS_KEY
from tests.index import MODEL

pytestmark = pytest.mark.django_db(transaction=True)

SUBSET = "x-gateway-destination-endpoint-subset"


def test_only_the_subsets_endpoints_are_chosen(gateway_of, redis_client) -> None:
    gateway = gateway_of(3, subset_from_header=True)
    address, pod = sorted(gateway.pods.items())[1]
    for prompt in ("one prompt", "another prompt", "a third prompt"):
        status, _, raw = gateway.post(
            "/v1/completions", {"model": MODEL, "prompt": prompt}, {SUBSET: address}
        )
        assert status == 200, raw
        assert json.loads(raw)["kvadmin"]["pod"] == pod


def test_a_subset_with_no_eligible_endpoint_is_a_503(gateway_of, redis_client) -> None:
    gateway = gateway_of(2, subset_from_header=True)
    status, _, raw = gateway.post(
        "/v1/completions", {"model": MODEL, "prompt": "hi"}, {SUBSET: "10.9.9.9:8000"}
    )
    assert status == 503
    assert json.loads(raw)["error"]["type"] == "no_endpoint"
    assert redis_client.xlen(DECISIONS_KEY) == 0
