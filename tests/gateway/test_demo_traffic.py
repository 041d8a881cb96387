"""The demo's traffic goes through the gateway (`simulate --routing gateway`): each request
with its own `X-Request-Id`, routed and recorded by the picker with no help from the client."""

import pytest

from kvadmin.fleet.traffic import ThroughGateway, TrafficGenerator
from kvadmin.fleet.workload import Workload
from kvadmin.routing import decisions, outcomes
from tests.index import MODEL
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_demo_traffic_through_the_gateway_is_routed_and_recorded(gateway_of, redis_client):
    gateway = gateway_of(3)
    traffic = TrafficGenerator(
        gateway.fleet.endpoints(), ThroughGateway(gateway.url), Workload(MODEL)
    )
    summary = traffic.run(requests=6)
    traffic.close()
    assert summary.requests == 6 and summary.failed == 0
    logged = decisions.recent(10, client=redis_client)
    assert len(logged) == 6
    assert len({d.request_id for d in logged}) == 6  # each request its own X-Request-Id
    assert all(d.request_id and len(d.request_id) == 36 for d in logged)
    assert sum(summary.requests_by_pod.values()) == 6
    assert set(summary.requests_by_pod) == set(gateway.pods.values())
    ids = [d.decision_id for d in logged]
    wait_until(lambda: len(outcomes.outcomes_of(redis_client, ids)) == 6, what="6 outcomes")
