"""GET /api/v1/decisions: recent decisions for machine clients, newest first."""

import pytest

from kvadmin.routing import service
from tests.index import MODEL
from tests.routing.conftest import PODS, hold, tokens

pytestmark = pytest.mark.django_db


@pytest.fixture
def get(client, token):
    def get(query: str = "", auth: str | None = token):
        headers = {"HTTP_AUTHORIZATION": f"Bearer {auth}"} if auth else {}
        response = client.get(f"/api/v1/decisions{query}", **headers)
        return response.status_code, response.json()

    return get


def test_it_lists_recent_decisions_in_the_score_shape(get, post_score, engines, redis_client):
    hold(redis_client, PODS[0], tokens(2), ["GPU", "CPU"])
    _, first = post_score({"model": MODEL, "token_ids": tokens(2)})
    _, second = post_score({"model": MODEL, "token_ids": tokens(3, start=7)})
    status, answer = get()
    assert status == 200
    assert answer["decisions"] == [second, first]


def test_limit_model_and_pod_narrow_it_down(get, engines, redis_client) -> None:
    hold(redis_client, PODS[2], tokens(1), ["GPU"])
    mine = service.score(MODEL, token_ids=tokens(1)).id
    for n in range(3):
        service.score(MODEL, token_ids=tokens(1, start=100 * (n + 1)), pods=[PODS[0]])
    assert len(get("?limit=2")[1]["decisions"]) == 2
    assert [d["decision_id"] for d in get(f"?pod={PODS[2]}")[1]["decisions"]] == [mine]
    assert len(get(f"?model={MODEL}")[1]["decisions"]) == 4
    assert get("?model=nobody")[1]["decisions"] == []


@pytest.mark.parametrize("limit", ["0", "1001", "many", "-1"])
def test_a_bad_limit_is_a_400(get, limit) -> None:
    status, answer = get(f"?limit={limit}")
    assert status == 400 and answer["field"] == "limit"


def test_it_requires_a_token(get) -> None:
    assert get(auth=None)[0] == 401
