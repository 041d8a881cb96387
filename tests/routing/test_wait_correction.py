"""The delivered correction of the wait, end to end (issue 33 item 4): a timed outcome moves
the chosen pod's factor by outcome_record.lua's step (the rule of
`scoring.route_state.corrected_wait_log`), and the next decision prices the pod's wait with it,
read in the decision's one round trip."""

import math
import time

import pytest

from scoring.keys import queue_key
from scoring.route_state import (
    WAIT_FACTOR_BOUNDS,
    corrected_prefill_log,
    corrected_wait_log,
    delivered_factor,
)
from tests.index import MODEL
from tests.routing.conftest import PODS, hold, request_tokens
from tests.routing.test_decision_outcomes import post_outcome  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db


def _queue_everywhere(client, wait_ms: float) -> None:
    """Every pod's virtual queue busy for `wait_ms`, so the request stays on its warm pod."""
    busy = time.time() * 1000 + wait_ms
    for pod in PODS:
        client.hset(queue_key(pod), mapping={"busy_until_ms": repr(busy), "prefill_ms": "5"})


def _chosen(answer: dict) -> dict:
    return next(e for e in answer["estimates"] if e["pod"] == answer["chosen"])


def _decided_on_a_queued_warm_pod(post_score, redis_client) -> tuple[dict, dict]:
    """A decision on PODS[0], which holds the request, every pod queued 2 s, no factor yet: the
    answer and the chosen pod's estimate."""
    hold(redis_client, PODS[0], request_tokens(3), ["GPU", "GPU"])
    _queue_everywhere(redis_client, 2_000)
    status, answer = post_score({"model": MODEL, "token_ids": request_tokens(3)})
    assert status == 200 and answer["chosen"] == PODS[0]
    chosen = _chosen(answer)
    assert chosen["wait_factor"] == 1.0
    return answer, chosen


def test_a_slow_outcome_raises_the_pods_wait_and_the_next_decision_prices_it(
    post_score,
    engines,
    redis_client,
    post_outcome,  # noqa: F811
) -> None:
    first, chosen = _decided_on_a_queued_warm_pod(post_score, redis_client)
    delivered_s = 3 * (chosen["wait_s"] + chosen["prefill_s"])

    status, _ = post_outcome(
        first["decision_id"],
        {"cached_tokens": 32, "prompt_tokens": 48, "ttft_ms": delivered_s * 1000},
    )
    assert status == 201
    stored = float(redis_client.hget(queue_key(PODS[0]), "wait_log"))
    assert stored == pytest.approx(
        corrected_wait_log(0.0, chosen["wait_s"], chosen["prefill_s"], delivered_s, 0.0)
    )
    assert stored > 0

    _queue_everywhere(redis_client, 2_000)
    _, second = post_score({"model": MODEL, "token_ids": request_tokens(3)})
    again = next(e for e in second["estimates"] if e["pod"] == PODS[0])
    assert again["wait_factor"] == pytest.approx(delivered_factor(repr(stored), WAIT_FACTOR_BOUNDS))
    assert again["wait_s"] == pytest.approx(again["queue_wait_s"] * again["wait_factor"])
    assert again["wait_s"] > again["queue_wait_s"]


def test_an_outcome_steps_the_factor_as_it_is_now_not_as_its_decision_priced_it(
    post_score,
    engines,
    redis_client,
    post_outcome,  # noqa: F811
) -> None:
    """The decision priced the wait at factor 1; other outcomes have since moved the factor to
    2: an outcome imposing twice the uncorrected wait confirms 2 rather than pushing it up."""
    first, chosen = _decided_on_a_queued_warm_pod(post_score, redis_client)
    redis_client.hset(queue_key(PODS[0]), "wait_log", repr(math.log(2.0)))
    delivered_s = chosen["prefill_s"] + 2 * chosen["wait_s"]

    post_outcome(
        first["decision_id"],
        {"cached_tokens": 32, "prompt_tokens": 48, "ttft_ms": delivered_s * 1000},
    )
    stored = float(redis_client.hget(queue_key(PODS[0]), "wait_log"))
    assert stored == pytest.approx(math.log(2.0))
    assert stored == pytest.approx(
        corrected_wait_log(math.log(2.0), chosen["wait_s"], chosen["prefill_s"], delivered_s, 0.0)
    )


def test_an_outcome_about_the_prefill_or_for_an_expired_queue_changes_no_wait(
    post_score,
    engines,
    redis_client,
    post_outcome,  # noqa: F811
) -> None:
    hold(redis_client, PODS[0], request_tokens(3), ["GPU", "GPU"])
    status, idle = post_score({"model": MODEL, "token_ids": request_tokens(3)})
    assert status == 200 and _chosen(idle)["wait_s"] == 0.0
    post_outcome(idle["decision_id"], {"cached_tokens": 32, "prompt_tokens": 48, "ttft_ms": 900})
    assert redis_client.hget(queue_key(idle["chosen"]), "wait_log") is None

    _queue_everywhere(redis_client, 2_000)
    _, queued = post_score({"model": MODEL, "token_ids": request_tokens(3)})
    redis_client.delete(queue_key(queued["chosen"]))  # idle a minute: the queue expired
    post_outcome(queued["decision_id"], {"cached_tokens": 32, "prompt_tokens": 48, "ttft_ms": 9e3})
    assert not redis_client.exists(queue_key(queued["chosen"]))


def test_a_slow_outcome_on_an_idle_pod_raises_its_prefill_estimates(
    post_score,
    engines,
    redis_client,
    post_outcome,  # noqa: F811
) -> None:
    """outcome_record.lua steps `prefill_log` as `corrected_prefill_log` does, under the
    decision's weights version, and the next decision prices the pod's prefill with it."""
    hold(redis_client, PODS[0], request_tokens(3), ["GPU", "GPU"])
    status, idle = post_score({"model": MODEL, "token_ids": request_tokens(3)})
    chosen = _chosen(idle)
    assert status == 200 and chosen["wait_s"] == 0.0 and chosen["prefill_factor"] == 1.0
    delivered_s = 3 * chosen["prefill_s"]
    post_outcome(
        idle["decision_id"],
        {"cached_tokens": 32, "prompt_tokens": 48, "ttft_ms": delivered_s * 1000},
    )
    stored = redis_client.hmget(queue_key(idle["chosen"]), ["prefill_log", "prefill_version"])
    expected = corrected_prefill_log(
        (0.0, None), idle["weights_version"], 0.0, chosen["prefill_s"], delivered_s
    )
    assert (float(stored[0]), int(stored[1])) == (pytest.approx(expected[0]), expected[1])

    _, second = post_score({"model": MODEL, "token_ids": request_tokens(3)})
    again = next(e for e in second["estimates"] if e["pod"] == idle["chosen"])
    assert again["prefill_factor"] == pytest.approx(math.exp(expected[0]))
    assert again["prefill_factor"] > 1.0
