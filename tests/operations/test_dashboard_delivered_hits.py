"""The dashboard's "Delivered hits" tile: the last hour's outcomes as available vs achieved vs
delivered cached tokens, with routing loss and index staleness named."""

import pytest

from kvadmin.dashboard.tiles import dashboard_tiles
from kvadmin.engines.models import Engine
from kvadmin.routing import outcomes, service
from kvadmin.routing.outcomes import Outcome
from tests.index import MODEL
from tests.routing.conftest import PODS, hold, request_tokens

pytestmark = pytest.mark.django_db


@pytest.fixture
def reported(redis_client) -> float:
    """Two decisions with outcomes: vllm-0 held 2 of the first prompt's 3 blocks and its
    engine delivered 1, its first token after 30 ms; the second prompt had no hit anywhere,
    none was delivered, and no time was reported. Returns the first one's predicted TTFT."""
    predicted = []
    for i, pod in enumerate(PODS[:2]):
        Engine.objects.create(pod=pod, model=MODEL, events_endpoint=f"tcp://127.0.0.1:{5557 + i}")
    hold(redis_client, PODS[0], request_tokens(3), ["GPU", "GPU"])
    for token_ids, cached, ttft in (
        (request_tokens(3), 16, 30.0),
        (request_tokens(3, start=999), 0, None),
    ):
        decision = service.score(MODEL, token_ids=token_ids)
        outcome = Outcome(cached_tokens=cached, prompt_tokens=48, ttft_ms=ttft)
        assert outcomes.record(redis_client, decision, outcome, 16) == "recorded"
        if ttft is not None:
            predicted.append(outcomes.predicted(decision, 16).ttft_ms)
    return predicted[0]


def test_the_tile_adds_up_the_hours_outcomes(reported, redis_client) -> None:
    hits = dashboard_tiles(redis_client).delivered
    assert (hits.outcomes, hits.prompt) == (2, 96)
    assert (hits.available, hits.achieved, hits.delivered) == (32, 32, 16)
    assert (hits.routing_loss, hits.index_staleness) == (0, 16)
    assert (hits.timed, hits.mean_ttft_ms) == (1, 30.0)
    assert hits.mean_predicted_ttft_ms == pytest.approx(reported)


def test_the_page_names_both_gaps(reported, client, django_user_model) -> None:
    client.force_login(django_user_model.objects.create_user("bob", password="pw-bob-12345"))
    page = client.get("/").content.decode()
    assert 'id="tile-delivered"' in page and "Delivered hits" in page
    assert 'data-routing-loss="0"' in page and 'data-index-staleness="16"' in page
    assert f'data-pod="{PODS[0]}"' in page
    assert 'data-delivered-ttft="30.0"' in page and "TTFT predicted" in page


def test_a_negative_staleness_says_what_it_means(
    reported, redis_client, client, django_user_model
) -> None:
    """Engines that hit more than predicted (here one outcome with 40 cached tokens, 24 more
    than the 16 predicted of the whole hour's) make it negative: the page says why."""
    decision = service.score(MODEL, token_ids=request_tokens(3, start=5000))
    outcome = Outcome(cached_tokens=40, prompt_tokens=48, ttft_ms=None)
    assert outcomes.record(redis_client, decision, outcome, 16) == "recorded"
    assert dashboard_tiles(redis_client).delivered.index_staleness == -24
    client.force_login(django_user_model.objects.create_user("bob", password="pw-bob-12345"))
    page = client.get("/").content.decode()
    assert 'data-index-staleness="-24"' in page
    assert "negative: the engines delivered 24 cached tokens more than predicted" in page
    assert "prompts longer than the 2,048 tokens a score looks at (128 blocks of 16" in page
