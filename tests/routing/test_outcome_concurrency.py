"""Outcomes posted at once to the real ASGI server: one is recorded, every other is a 409, and
the accounting counts it once."""

import threading
from concurrent.futures import ThreadPoolExecutor

from kvadmin.api.models import ApiToken
from kvadmin.engines.models import Engine
from kvadmin.metrics import families
from kvadmin.metrics.families import label_field
from tests.conftest import http_json
from tests.index import MODEL
from tests.routing.conftest import PODS, hold, request_tokens
from tests.waiting import patient

POSTS = 8


def test_concurrent_posts_of_one_outcome_record_it_once(
    asgi_server, transactional_db, redis_client
) -> None:
    Engine.objects.create(pod=PODS[0], model=MODEL, events_endpoint="tcp://127.0.0.1:5557")
    token = ApiToken.issue("gateway", "score")[1]
    hold(redis_client, PODS[0], request_tokens(4), ["GPU"] * 4)
    status, decision = http_json(
        f"{asgi_server}/api/v1/score", {"model": MODEL, "token_ids": request_tokens(4)}, token
    )
    assert status == 200, decision
    url = f"{asgi_server}/api/v1/decisions/{decision['decision_id']}/outcome"
    start = threading.Barrier(POSTS)

    def post(_: int) -> int:
        start.wait(timeout=patient(10))
        return http_json(url, {"cached_tokens": 48, "prompt_tokens": 64}, token)[0]

    with ThreadPoolExecutor(POSTS) as pool:
        statuses = sorted(pool.map(post, range(POSTS)))

    assert statuses == [201] + [409] * (POSTS - 1)
    field = label_field((MODEL, PODS[0]))
    assert redis_client.hget(families.OUTCOMES.key, field) == "1"
    assert redis_client.hget(families.HIT_TOKENS_DELIVERED.key, field) == "48"
