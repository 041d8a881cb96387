"""Calibration from delivered outcomes (issue 33 item 1): the outcomes gateways post are
evidence beside the engines' counters, fitted robustly, and weighed so that no requester,
engine or model moves what is not its own beyond its share. Decisions and outcomes go through
the real log and the real recording script in a real Redis; versions into the real database."""

import pytest

from kvadmin.engines.models import Engine
from kvadmin.weights.calibration import calibrate
from kvadmin.weights.calibration_step import RULES
from kvadmin.weights.evidence import evidence_fit
from kvadmin.weights.versions import current_version
from tests.routing.delivered import routed
from tests.weights.test_calibration import slow_pod_samples

T0, SPEED = 0.03, 4000.0
"""The pods' true prefill: slower than the defaults (T0 0.015 s, 10,000 tokens/s)."""


def prompts(count: int) -> list[int]:
    return [200 + 150 * (n % 7) for n in range(count)]


def report(redis_client, pod: str, count: int, *, speed: float = SPEED, t0: float = T0,
           **routing) -> None:  # fmt: skip
    """`count` outcomes of requests to `pod` that took `t0` + tokens / `speed` to prefill."""
    for tokens in prompts(count):
        routed(redis_client, pod, prompt=tokens, ttft_s=t0 + tokens / speed, predicted_s=0.05,
               **routing)  # fmt: skip


def engine(pod: str, model: str = "m") -> Engine:
    return Engine.objects.create(
        pod=pod, model=model, kind="vllm", events_endpoint="tcp://127.0.0.1:1"
    )


def pod_line(fitted, pod: str):
    return next(found for found in fitted.pods if found.pod == pod).line


@pytest.mark.django_db(transaction=True)
def test_outcomes_alone_calibrate_a_pod_whose_engine_reports_no_counters(
    version_one, redis_client, fresh_weights
) -> None:
    engine("vllm-0")
    report(redis_client, "vllm-0", 30)
    result = calibrate()
    assert result["result"] == "changed", result
    pods = {pod: speed for pod, _, speed in current_version().weight_config.ttft.pod_fits}
    assert pods["vllm-0"] == round(10_000 / RULES.max_step), "one bounded step towards 4000"
    for _ in range(8):
        if calibrate()["result"] == "unchanged":
            break
    else:
        pytest.fail("calibration kept adding versions")
    (pod,) = current_version().weight_config.ttft.pod_fits
    assert pod[1] == pytest.approx(T0, abs=0.003) and pod[2] == pytest.approx(SPEED, rel=0.1)


@pytest.mark.django_db
def test_outliers_among_the_outcomes_do_not_move_the_fit(version_one, redis_client) -> None:
    engine("vllm-0")
    report(redis_client, "vllm-0", 30)
    for tokens in prompts(6):  # a gateway's timer that stalled: 20x the true time
        routed(redis_client, "vllm-0", prompt=tokens, ttft_s=20 * (T0 + tokens / SPEED),
               predicted_s=0.05)  # fmt: skip
    line = pod_line(evidence_fit(redis_client, version_one.weight_config), "vllm-0")
    assert line.tokens_per_s == pytest.approx(SPEED, rel=0.03)
    assert line.first_token_s == pytest.approx(T0, abs=0.002)
    assert RULES.min_confidence <= line.confidence < 1, "the outliers lower the confidence"
    assert line.error < 0.05, "the median error follows the inliers"


@pytest.mark.django_db
def test_a_flood_of_outcomes_from_one_requester_weighs_one_vote(version_one, redis_client) -> None:
    """The engine's counters and an honest gateway's few outcomes say 4000 tokens/s; another
    requester posts ten times as many outcomes claiming a pod three times slower."""
    engine("vllm-0")
    slow_pod_samples(redis_client, "vllm-0", T0, SPEED)
    report(redis_client, "vllm-0", 12, requester="gateway")
    report(redis_client, "vllm-0", 120, speed=SPEED / 3, requester="flooder")
    fitted = evidence_fit(redis_client, version_one.weight_config)
    line = pod_line(fitted, "vllm-0")
    assert line.tokens_per_s == pytest.approx(SPEED, rel=0.05)
    pod = next(found for found in fitted.pods if found.pod == "vllm-0")
    assert pod.sources == 3, "the engine, the gateway and the flooder: one vote each"


@pytest.mark.django_db
def test_a_requester_moves_no_other_model_nor_the_pooled_t0(version_one, redis_client) -> None:
    """A requester reports absurdly slow first tokens for the one pod of model "a"; model "b"
    runs two pods whose engines' counters say T0 0.03 s."""
    engine("a-0", "a")
    engine("b-0", "b")
    engine("b-1", "b")
    report(redis_client, "a-0", 60, t0=0.9, model="a", requester="hostile")
    slow_pod_samples(redis_client, "b-0", T0, SPEED)
    slow_pod_samples(redis_client, "b-1", T0, SPEED)
    fitted = evidence_fit(redis_client, version_one.weight_config)
    assert fitted.first_token_s == pytest.approx(T0, abs=0.002), "the pooled T0 is b's"
    models = {model.model: model for model in fitted.models}
    assert models["b"].tokens_per_s == pytest.approx(SPEED, rel=0.05)
    assert pod_line(fitted, "b-0").first_token_s == pytest.approx(T0, abs=0.002)
    assert models["a"].intercept_s == pytest.approx(0.9, abs=0.01), "a's own evidence is a's"


@pytest.mark.django_db
def test_outcomes_that_cannot_time_a_prefill_are_left_out(version_one, redis_client) -> None:
    """Outcomes of a model the pod does not serve, served by another pod (a fallback), or
    mostly queueing (the wait estimate's error would be fitted as prefill) are no evidence."""
    engine("vllm-0")
    engine("vllm-1")
    report(redis_client, "vllm-0", 30, model="other")
    report(redis_client, "vllm-0", 30, served="vllm-1")
    for tokens in prompts(30):
        routed(redis_client, "vllm-0", prompt=tokens, ttft_s=1.0, predicted_s=1.0, wait_s=0.8)
    fitted = evidence_fit(redis_client, version_one.weight_config)
    assert all(pod.outcomes == 0 and pod.line is None for pod in fitted.pods)
    assert not fitted.fitted


@pytest.mark.django_db
def test_a_latency_in_every_outcome_moves_neither_t0_nor_the_speed(
    version_one, redis_client
) -> None:
    """The engine's counters time its prefills at T0 0.03 s and 4000 tokens/s; a gateway's
    outcomes hold 20 ms more each (its own latency, outside the pod). The fitted speed stays the
    pod's, and so does T0: taken as T0, the latency went into every prefill estimate and so
    into the virtual queue once per request queued."""
    engine("vllm-0")
    engine("vllm-1")
    slow_pod_samples(redis_client, "vllm-0", T0, SPEED)
    slow_pod_samples(redis_client, "vllm-1", T0, SPEED)
    report(redis_client, "vllm-0", 30, t0=T0 + 0.02)
    report(redis_client, "vllm-1", 30, t0=T0 + 0.02, speed=SPEED / 2)
    fitted = evidence_fit(redis_client, version_one.weight_config)
    line = pod_line(fitted, "vllm-0")
    assert line.tokens_per_s == pytest.approx(SPEED, rel=0.03)
    assert line.first_token_s == pytest.approx(T0, abs=0.002)
    slower = pod_line(fitted, "vllm-1")
    assert slower.first_token_s == pytest.approx(T0, abs=0.002)
    assert SPEED / 2 < slower.tokens_per_s < SPEED, "the outcomes still vote on the speed"
    assert fitted.first_token_s == pytest.approx(T0, abs=0.002), "the pooled T0 too"
