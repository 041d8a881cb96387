"""Two picker processes behind one Envoy route as one: the routing state (virtual queues,
speculative entries) is in Redis, so a burst of one prefix sticks to one pod whichever picker
decides."""

import pytest

from kvadmin.gateway.protocol import DECISION_HEADER
from tests.gateway.conftest import logged
from tests.index import MODEL

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_second_picker_sees_the_first_ones_speculative_entries(
    gateway_of, redis_client
) -> None:
    gateway = gateway_of(3, pickers=2)
    first, second = gateway.pickers
    prompt = list(range(5000, 5000 + 16 * 32))
    decisions = []
    for _ in range(6):
        status, headers, raw = gateway.post("/v1/completions", {"model": MODEL, "prompt": prompt})
        assert status == 200, raw
        decisions.append(logged(headers[DECISION_HEADER], redis_client))
    routed = [p.counter("kvadmin_picker_requests", answer="routed") for p in (first, second)]
    assert min(routed) >= 1 and sum(routed) == 6  # both pickers decided
    hot = decisions[0].chosen
    for decision in decisions[1:]:
        assert decision.chosen == hot
        held = next(e for e in decision.estimates if e.pod == hot)
        assert held.speculative_blocks > 0 or held.cached_tokens > 0
