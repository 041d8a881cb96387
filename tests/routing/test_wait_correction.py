"""The delivered correction of the wait, end to end (issue 33 item 4): a timed outcome moves
the chosen pod's factor by outcome_record.lua's step (the rule of
`scoring.route_state.corrected_wait_log`), and the next decision prices the pod's wait with it,
read in the decision's one round trip."""

import math
import time

import pytest

from scoring.keys import queue_key
from scoring.route_state import (
    PREFILL_OFFSET_MIN_OUTCOMES,
    WAIT_FACTOR_BOUNDS,
    PrefillFit,
    corrected_prefill_fit,
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
    """outcome_record.lua steps the prefill correction as `corrected_prefill_fit` does, under
    the decision's weights version, and the next decision prices the pod's prefill with it."""
    hold(redis_client, PODS[0], request_tokens(3), ["GPU", "GPU"])
    status, idle = post_score({"model": MODEL, "token_ids": request_tokens(3)})
    chosen = _chosen(idle)
    assert status == 200 and chosen["wait_s"] == 0.0 and chosen["prefill_factor"] == 1.0
    delivered_s = 3 * chosen["prefill_s"]
    post_outcome(
        idle["decision_id"],
        {"cached_tokens": 32, "prompt_tokens": 48, "ttft_ms": delivered_s * 1000},
    )
    expected = corrected_prefill_fit(
        PrefillFit(), idle["weights_version"], 0.0, chosen["prefill_s"], chosen["prefill_s"],
        delivered_s,
    )  # fmt: skip
    assert _stored(redis_client, idle["chosen"]) == _expected(expected)

    _, second = post_score({"model": MODEL, "token_ids": request_tokens(3)})
    again = next(e for e in second["estimates"] if e["pod"] == idle["chosen"])
    assert again["prefill_factor"] == pytest.approx(expected.factor)
    assert again["prefill_factor"] > 1.0


def test_a_latency_in_every_outcome_is_learned_as_the_pods_prefill_offset(
    post_score,
    engines,
    redis_client,
    post_outcome,  # noqa: F811
) -> None:
    """Outcomes of short and long prefills on an idle pod, each delivered 30 ms over its
    prediction: outcome_record.lua fits the factor and the offset step for step as
    `corrected_prefill_fit`, and the next decision adds the offset to the pod's estimate
    (and names it)."""
    hold(redis_client, PODS[0], request_tokens(64), ["GPU"] * 63)
    expected = PrefillFit()
    for n in range(4 * PREFILL_OFFSET_MIN_OUTCOMES):
        # Alternately a hit of 63 blocks and a miss of 63, on the one pod without a queue.
        tokens = request_tokens(64)
        if n % 2:
            tokens = request_tokens(1) + request_tokens(63, start=10_000 + n * 1024)
        _queue_everywhere(redis_client, 60_000)
        redis_client.hset(queue_key(PODS[0]), "busy_until_ms", "0")
        _, answer = post_score({"model": MODEL, "token_ids": tokens})
        chosen = _chosen(answer)
        assert answer["chosen"] == PODS[0] and chosen["wait_s"] == 0.0
        uncorrected = (chosen["prefill_s"] - chosen["prefill_offset_s"]) / chosen["prefill_factor"]
        delivered_s = uncorrected + 0.03
        status, body = post_outcome(
            answer["decision_id"],
            {"cached_tokens": chosen["cached_tokens"], "prompt_tokens": 1024,
             "ttft_ms": delivered_s * 1000},
        )  # fmt: skip
        assert status == 201, (body, answer)
        expected = corrected_prefill_fit(
            expected, answer["weights_version"], 0.0, chosen["prefill_s"], uncorrected,
            delivered_s,
        )  # fmt: skip
        assert _stored(redis_client, PODS[0]) == _expected(expected)
    assert expected.offset_s > 0.015

    _queue_everywhere(redis_client, 60_000)
    redis_client.hset(queue_key(PODS[0]), "busy_until_ms", "0")
    _, last = post_score({"model": MODEL, "token_ids": request_tokens(64)})
    assert _chosen(last)["prefill_offset_s"] == pytest.approx(expected.offset_s)


def _stored(client, pod: str) -> tuple:
    """The pod's prefill correction as outcome_record.lua left it."""
    log, offset, version, fit = client.hmget(
        queue_key(pod), ["prefill_log", "prefill_offset", "prefill_version", "prefill_fit"]
    )
    outcomes, *means = fit.split()
    return (float(log), float(offset), int(version), int(outcomes), *map(float, means))


def _expected(fit: PrefillFit) -> tuple:
    return (
        pytest.approx(fit.log, abs=1e-12), pytest.approx(fit.offset_s, abs=1e-12), fit.version,
        fit.outcomes, *(pytest.approx(mean, rel=1e-12) for mean in fit.means),
    )  # fmt: skip
