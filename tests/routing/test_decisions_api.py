"""GET /api/v1/decisions: recent decisions for machine clients, newest first."""

import pytest

from kvadmin.routing import service
from tests.index import MODEL
from tests.routing.conftest import PODS, hold, request_tokens

pytestmark = pytest.mark.django_db


@pytest.fixture
def get_decisions(client, token):
    """GET /api/v1/decisions in-process with a query; returns the status and the JSON answer."""

    def get_decisions(query: str = "", auth: str | None = token):
        headers = {"HTTP_AUTHORIZATION": f"Bearer {auth}"} if auth else {}
        response = client.get(f"/api/v1/decisions{query}", **headers)
        return response.status_code, response.json()

    return get_decisions


def test_it_lists_recent_decisions_in_the_score_shape(
    get_decisions, post_score, engines, redis_client
):
    hold(redis_client, PODS[0], request_tokens(2), ["GPU", "CPU"])
    _, first = post_score({"model": MODEL, "token_ids": request_tokens(2)})
    _, second = post_score({"model": MODEL, "token_ids": request_tokens(3, start=7)})
    status, answer = get_decisions()
    assert status == 200
    assert answer["decisions"] == [second, first]


def test_limit_model_and_pod_narrow_it_down(get_decisions, engines, redis_client) -> None:
    hold(redis_client, PODS[2], request_tokens(1), ["GPU"])
    mine = service.score(MODEL, token_ids=request_tokens(1)).decision_id
    for n in range(3):
        service.score(MODEL, token_ids=request_tokens(1, start=100 * (n + 1)), pods=[PODS[0]])
    assert len(get_decisions("?limit=2")[1]["decisions"]) == 2
    assert [d["decision_id"] for d in get_decisions(f"?pod={PODS[2]}")[1]["decisions"]] == [mine]
    assert len(get_decisions(f"?model={MODEL}")[1]["decisions"]) == 4
    assert get_decisions("?model=nobody")[1]["decisions"] == []


@pytest.mark.parametrize("limit", ["0", "1001", "many", "-1"])
def test_a_bad_limit_is_a_400(get_decisions, limit) -> None:
    status, answer = get_decisions(f"?limit={limit}")
    assert status == 400 and answer["field"] == "limit"


def test_it_requires_a_token(get_decisions) -> None:
    assert get_decisions(auth=None)[0] == 401
