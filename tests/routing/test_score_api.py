"""POST /api/v1/score: the contract a gateway relies on, with the scoring explained."""

import json

import msgspec
import pytest

from kvadmin.routing import decisions, outcomes
from tests.index import MODEL
from tests.routing.conftest import PODS, hold, request_tokens

pytestmark = pytest.mark.django_db


def test_it_chooses_the_pod_with_the_longest_weighted_prefix(
    post_score, engines, redis_client
) -> None:
    request = request_tokens(8)
    hold(redis_client, PODS[0], request, ["GPU"] * 4)
    hold(redis_client, PODS[1], request, ["GPU"] * 4 + ["CPU"] * 2)
    status, answer = post_score({"model": MODEL, "token_ids": request, "request_id": "r-1"})
    assert status == 200
    assert answer["chosen"] == PODS[1] and answer["tie_break"] is False
    assert answer["model"] == MODEL and answer["request_id"] == "r-1"
    assert (answer["blocks"], answer["longest_match"], answer["tokens"]) == (8, 6, 128)
    assert answer["candidates"] == list(PODS)
    best, second = answer["scores"]
    assert best == {
        "pod": PODS[1],
        "score": int(((1.0 * 4 + 0.8 + 0.8) / 8) * 100),
        "matched_blocks": 6,
        "weighted_sum": 5.6,
        "media": {"GPU": 4, "CPU": 2},
        "runs": [["GPU", 4], ["CPU", 2]],
    }
    assert second["pod"] == PODS[0] and second["score"] == 50
    assert answer["weights"] == {"GPU": 1.0, "CPU": 0.8}
    assert set(answer["timings_ms"]) == {"tokenize", "hash", "index", "score", "total"}
    assert answer["timings_ms"]["tokenize"] == 0


def test_a_request_nobody_holds_is_routed_by_the_tie_break(
    post_score, engines, redis_client
) -> None:
    status, answer = post_score({"model": MODEL, "token_ids": request_tokens(3)})
    assert status == 200
    assert answer["scores"] == [] and answer["longest_match"] == 0
    assert answer["chosen"] in PODS and answer["tie_break"] is True
    assert answer["policy"] == "ttft" and answer["reason"].startswith("3 pods tie")
    # kthena's pick ignores load: the same request again goes to the same pod.
    _, again = post_score({"model": MODEL, "token_ids": request_tokens(3), "policy": "kthena"})
    assert again["chosen"] == answer["chosen"] and again["tie_break"] is True
    assert again["policy"] == "kthena"


def test_back_to_back_requests_see_the_virtual_queue(post_score, engines, redis_client) -> None:
    """A 20,000-token request keeps its pod busy for ~2 s and leaves speculative entries for
    its 128 hashed blocks there; the 2,048 tokens they cache save far less than that wait plus
    the idle pods' work penalty, so the same request again goes to one of the two idle pods
    (they tie)."""
    request = request_tokens(1250)
    _, first = post_score({"model": MODEL, "token_ids": request})
    _, again = post_score({"model": MODEL, "token_ids": request})
    assert again["chosen"] != first["chosen"] and again["tie_break"] is True
    busy = next(e for e in again["estimates"] if e["pod"] == first["chosen"])
    assert busy["speculative_blocks"] == 128 and busy["cached_tokens"] == 2048
    assert busy["wait_s"] > 1.0 and busy["load_stale"] is True
    assert again["estimates"][0]["pod"] == again["chosen"]
    assert again["stale_loads"] == sorted(PODS)


def test_only_the_requested_pods_are_candidates(post_score, engines, redis_client) -> None:
    request = request_tokens(4)
    hold(redis_client, PODS[0], request, ["GPU"] * 4)
    hold(redis_client, PODS[1], request, ["GPU"] * 2)
    status, answer = post_score({"model": MODEL, "token_ids": request, "pods": [PODS[1]]})
    assert status == 200
    assert answer["candidates"] == [PODS[1]] and answer["chosen"] == PODS[1]
    assert answer["dropped"] == {"non_candidates": [PODS[0]], "stale": []}


def test_disabled_engines_are_not_candidates_by_default(post_score, engines, redis_client):
    engines[0].enabled = False
    engines[0].save()
    hold(redis_client, PODS[0], request_tokens(2), ["GPU", "GPU"])
    _, answer = post_score({"model": MODEL, "token_ids": request_tokens(2)})
    assert answer["candidates"] == list(PODS[1:])
    assert answer["dropped"]["non_candidates"] == [PODS[0]]


def test_every_decision_is_recorded_as_answered(post_score, engines, redis_client) -> None:
    hold(redis_client, PODS[2], request_tokens(2), ["CPU_PINNED", None])
    _, answer = post_score({"model": MODEL, "token_ids": request_tokens(2), "request_id": "r-9"})
    [recorded] = decisions.recent(10)
    assert json.loads(msgspec.json.encode(outcomes.decision_answer(recorded))) == answer
    assert recorded.scores[0].runs == [("CPU_PINNED", 1), (None, 1)]
    assert recorded.first_block == decisions.recent(1)[0].first_block != 0
