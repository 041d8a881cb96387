"""Demo traffic routed by kvadmin's scoring API posts each request's outcome (the pod's usage),
and /metrics then accounts available, achieved and delivered hits per model and pod. Each
request has its own request id, which request-id search finds."""

import urllib.request

from kvadmin.api.models import ApiToken
from kvadmin.engines.models import Engine
from kvadmin.fleet.scoring_router import ScoringApiRouter
from kvadmin.fleet.traffic import TrafficGenerator
from kvadmin.fleet.workload import Workload
from kvadmin.search.lookup import search
from tests.conftest import http_json
from tests.fleet.conftest import StartFleet, local_config
from tests.operations.conftest import parse
from tests.waiting import patient

REQUESTS = 24


def _scrape(url: str) -> dict[str, dict[str, float]]:
    """Each outcome family's samples by pod."""
    token = ApiToken.issue("prometheus", "metrics")[1]
    request = urllib.request.Request(f"{url}/metrics", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=patient(10)) as response:
        samples = parse(response.read().decode())
    found: dict[str, dict[str, float]] = {}
    for (name, labels), value in samples.items():
        if name.startswith(("kvadmin_outcome", "kvadmin_hit_tokens")):
            found.setdefault(name, {})[dict(labels)["pod"]] = value
    return found


def test_routed_traffic_posts_outcomes_that_the_metrics_account(
    start_fleet: StartFleet, asgi_server, transactional_db, redis_client
) -> None:
    fleet = start_fleet(
        local_config(gpu_blocks=64, cpu_blocks=64),
        local_config("sglang-0.default", "sglang", gpu_blocks=64, cpu_blocks=64),
    )
    for endpoint in fleet.endpoints():
        Engine.objects.create(
            pod=endpoint.name,
            model=endpoint.model,
            kind=endpoint.kind,
            events_endpoint="tcp://127.0.0.1:1",
            http_base_url=endpoint.url,
        )
    token = ApiToken.issue("simulator", "score decisions:read")[1]
    router = ScoringApiRouter(asgi_server, token)
    traffic = TrafficGenerator(fleet.endpoints(), router, Workload(fleet.pods[0].model))
    summary = traffic.run(requests=REQUESTS)
    traffic.close()

    assert (summary.requests, summary.failed) == (REQUESTS, 0)
    assert router.outcomes_reported == REQUESTS
    metrics = _scrape(asgi_server)
    assert sum(metrics["kvadmin_outcomes_total"].values()) == REQUESTS
    assert metrics["kvadmin_outcomes_total"] == {
        pod: float(n) for pod, n in summary.requests_by_pod.items() if n
    }
    delivered = metrics["kvadmin_hit_tokens_delivered_total"]
    assert sum(delivered.values()) == summary.cached_tokens > 0
    assert sum(metrics["kvadmin_outcome_prompt_tokens_total"].values()) == summary.prompt_tokens
    available = metrics["kvadmin_hit_tokens_available_total"]
    achieved = metrics["kvadmin_hit_tokens_achieved_total"]
    assert all(available[pod] >= achieved[pod] for pod in achieved)
    assert sum(achieved.values()) > 0, "kvadmin's own routing predicts repeated prefixes"

    status, listed = http_json(f"{asgi_server}/api/v1/decisions?limit={REQUESTS}", token=token)
    assert status == 200
    by_request = {r.index: r for r in traffic.records}
    shown = list(reversed(listed["decisions"]))
    assert [d["delivered"]["cached_tokens"] for d in shown] == [
        by_request[i].cached_tokens for i in range(REQUESTS)
    ]
    request_ids = [d["request_id"] for d in shown]
    assert None not in request_ids and len(set(request_ids)) == REQUESTS
    [found] = search(redis_client, request_ids[0]).matches
    assert found.kind == "request"
