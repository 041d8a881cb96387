"""A decision reads its model's index group, and the routing state and decision log on
REDIS_URL: the API's async path and the sync service alike."""

import pytest
import redis

from kvadmin.routing.service import score
from scoring import keys
from tests.index import MODEL
from tests.routing.conftest import PODS, hold, request_tokens

pytestmark = pytest.mark.django_db


def test_the_api_scores_from_the_models_group(
    post_score, engines, grouped: redis.Redis, redis_client: redis.Redis
) -> None:
    request = request_tokens(8)
    hold(grouped, PODS[1], request, ["GPU"] * 6)
    hold(redis_client, PODS[2], request, ["GPU"] * 8)  # REDIS_URL no longer holds MODEL's index
    status, answer = post_score({"model": MODEL, "token_ids": request})
    assert status == 200
    assert answer["chosen"] == PODS[1] and answer["longest_match"] == 6
    assert [scored["pod"] for scored in answer["scores"]] == [PODS[1]]
    assert redis_client.xlen(keys.DECISIONS_KEY) == 1 and not grouped.exists(keys.DECISIONS_KEY)


def test_the_sync_service_scores_from_the_models_group(
    engines, grouped: redis.Redis, redis_client: redis.Redis
) -> None:
    request = request_tokens(4)
    hold(grouped, PODS[0], request, ["GPU"] * 4)
    decision = score(MODEL, token_ids=request)
    assert decision.chosen == PODS[0] and decision.longest_match == 4
    assert decision.log_id and redis_client.xlen(keys.DECISIONS_KEY) == 1


def test_back_to_back_decisions_see_the_routing_state_on_redis_url(
    post_score, engines, grouped: redis.Redis, redis_client: redis.Redis
) -> None:
    """As tests/routing/test_score_api.py's virtual queue: the first decision's queue and
    speculative entries, written on REDIS_URL, steer the second, read there too."""
    request = request_tokens(1250)
    _, first = post_score({"model": MODEL, "token_ids": request})
    _, again = post_score({"model": MODEL, "token_ids": request})
    assert again["chosen"] != first["chosen"]
    busy = next(e for e in again["estimates"] if e["pod"] == first["chosen"])
    assert busy["speculative_blocks"] == 128 and busy["wait_s"] > 1.0
    assert redis_client.exists(keys.queue_key(first["chosen"]))
    assert not grouped.exists(keys.queue_key(first["chosen"]))


def test_a_model_of_the_default_group_scores_from_redis_url(
    db, grouped: redis.Redis, redis_client: redis.Redis
) -> None:
    from kvadmin.engines.models import Engine
    from tests.index import OTHER_MODEL

    Engine.objects.create(
        pod="llama-0.default", model=OTHER_MODEL, kind="vllm", events_endpoint="tcp://h:1"
    )
    request = request_tokens(3)
    hold(redis_client, "llama-0.default", request, ["GPU"] * 3, model=OTHER_MODEL)
    decision = score(OTHER_MODEL, token_ids=request)
    assert decision.chosen == "llama-0.default" and decision.longest_match == 3
