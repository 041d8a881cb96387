"""The decision log: a capped stream read newest first, filtered by model or pod, and detailed
enough to replay a decision under other weights."""

import pytest
from django.test import override_settings

from kvadmin.engines.models import Engine
from kvadmin.metrics import recorder
from kvadmin.routing import decisions, service
from kvadmin.weights.active import active_weights
from scoring.keys import DECISIONS_KEY
from scoring.weights import TierWeights
from tests.index import MODEL
from tests.routing.conftest import PODS, hold, request_tokens

pytestmark = pytest.mark.django_db


def test_the_log_is_capped(engines, redis_client) -> None:
    with override_settings(KVADMIN={"DECISIONS_MAX": 100}):
        for _ in range(400):
            service.score(MODEL, token_ids=[1, 2, 3])
    # Trimming is approximate (whole stream nodes of 100 entries), never unbounded.
    assert 100 <= redis_client.xlen(DECISIONS_KEY) <= 200


def test_recent_reads_newest_first_and_filters(engines, redis_client) -> None:
    Engine.objects.create(pod="sglang-0.default", model="other/model", events_endpoint="ipc://x")
    hold(redis_client, PODS[1], request_tokens(2), ["GPU", "GPU"])
    ids = [
        service.score(MODEL, token_ids=request_tokens(2), request_id=f"r{n}").decision_id
        for n in range(3)
    ]
    other = service.score("other/model", token_ids=request_tokens(1)).decision_id
    assert [d.decision_id for d in decisions.recent(10)] == [other, *reversed(ids)]
    assert [d.decision_id for d in decisions.recent(2)] == [other, ids[2]]
    assert [d.decision_id for d in decisions.recent(10, model=MODEL)] == list(reversed(ids))
    assert [d.decision_id for d in decisions.recent(10, pod=PODS[1])] == list(reversed(ids))
    assert decisions.recent(10, model="nobody") == []


def test_a_decision_is_found_by_its_log_id(engines, redis_client) -> None:
    decision = service.score(MODEL, token_ids=[5])
    assert decision.log_id and decisions.get(decision.log_id) == decision
    assert decisions.get("1-1") is None
    assert decisions.get("not-an-id") is None


def test_entries_that_are_not_decisions_are_skipped(engines, redis_client) -> None:
    service.score(MODEL, token_ids=[5])
    redis_client.xadd(DECISIONS_KEY, {"d": "{not a decision"})
    redis_client.xadd(DECISIONS_KEY, {"other": "field"})
    assert len(decisions.recent(10)) == 1


def test_scoring_without_recording_leaves_the_log_alone(engines, redis_client) -> None:
    service.score(MODEL, token_ids=[5], record=False)
    with override_settings(KVADMIN={"DECISIONS_RECORD": False}):
        service.score(MODEL, token_ids=[5])
    assert redis_client.xlen(DECISIONS_KEY) == 0


def test_a_recorded_decision_replays_to_the_same_result(engines, redis_client) -> None:
    request = request_tokens(10)
    hold(redis_client, PODS[0], request, ["GPU"] * 3 + ["CPU"] * 5)
    hold(redis_client, PODS[1], request, ["GPU"] * 2 + [None] * 4 + ["DISK"])
    hold(redis_client, PODS[2], request, ["CPU_PINNED"] * 9)
    decision = service.score(MODEL, token_ids=request)
    [recorded] = decisions.recent(1)
    chosen, pods = decisions.rescore(recorded, active_weights().weights)
    assert chosen == decision.chosen
    assert [(p.pod, p.score, p.weighted_sum) for p in pods] == [
        (s.pod, s.score, s.weighted_sum) for s in decision.scores
    ]


def test_a_replay_under_other_weights_may_choose_another_pod(engines, redis_client) -> None:
    request = request_tokens(4)
    hold(redis_client, PODS[0], request, ["GPU"] * 3)
    hold(redis_client, PODS[1], request, ["CPU"] * 4)
    [recorded] = [service.score(MODEL, token_ids=request)]
    assert recorded.chosen == PODS[1]  # 4 * 0.8 = 3.2 beats 3 * 1.0
    chosen, pods = decisions.rescore(recorded, TierWeights({"cpu": 0.5}))
    assert chosen == PODS[0]
    assert [(p.pod, p.score) for p in pods] == [(PODS[0], 75), (PODS[1], 50)]


def test_a_replay_of_a_cold_request_keeps_its_tie_break(engines, redis_client) -> None:
    recorded = service.score(MODEL, token_ids=request_tokens(2))
    assert decisions.rescore(recorded, TierWeights({"gpu": 0.1}))[0] == recorded.chosen


def test_recording_also_counts_the_decision_in_the_metrics(engines, redis_client) -> None:
    decision = service.score(MODEL, token_ids=request_tokens(2))
    service.score(MODEL, token_ids=request_tokens(2), record=False)
    counted = redis_client.hget(recorder.hits_key(int(decision.ts // 60)), "decisions")
    assert counted == "1"
