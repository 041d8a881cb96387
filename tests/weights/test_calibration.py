"""Continuous calibration (issue 33 item 1): a guarded step from the parameters in effect
towards the engines' fit, appended as a version attributed to calibration, and never when the
operator pinned the parameters."""

import json

import pytest

from kvadmin.engines.models import Engine
from kvadmin.metrics.collector import IndexCollector
from kvadmin.weights.active import active_weights
from kvadmin.weights.calibration import calibrate
from kvadmin.weights.calibration_step import RULES, step
from kvadmin.weights.config import WeightConfig
from kvadmin.weights.fit import Fit, Line, ModelFit, PodFit
from kvadmin.weights.models import TierWeightsVersion
from kvadmin.weights.versions import current_version, history, save_version
from scoring import keys
from scoring.ttft import DEFAULT_PARAMETERS, TtftParameters


def fitted(t0: float, speed: float, confidence: float = 1.0, windows: int = 20) -> Fit:
    line = Line(t0, speed, windows, confidence, 0.01)
    model = ModelFit("m", 1, windows, 100, speed, t0, "", confidence, 0.01)
    return Fit(DEFAULT_PARAMETERS, [model], t0, pods=[PodFit("p", "m", line)])


def test_a_step_moves_a_bounded_factor_towards_the_fit() -> None:
    moved = step(DEFAULT_PARAMETERS, fitted(0.03, 40_000))
    assert moved is not None
    pods = {pod: (t0, speed) for pod, t0, speed in moved.parameters.pod_fits}
    assert pods["p"] == (pytest.approx(0.015 * RULES.max_step + RULES.t0_slack_s),
                         10_000 * RULES.max_step)  # fmt: skip
    assert dict(moved.parameters.prefill_tokens_per_s) == {"m": 10_000 * RULES.max_step}
    assert any("pod p" in change and "confidence 1.00" in change for change in moved.changes)


def test_steps_converge_and_then_add_nothing() -> None:
    parameters = DEFAULT_PARAMETERS
    for _ in range(10):
        moved = step(parameters, fitted(0.02, 5000))
        if moved is None:
            break
        parameters = moved.parameters
    else:
        pytest.fail("never converged")
    (pod,) = parameters.pod_fits
    assert pod[1] == pytest.approx(0.02, abs=0.002) and pod[2] == pytest.approx(5000, rel=0.1)


@pytest.mark.parametrize(
    "unusable", [fitted(0.03, 40_000, confidence=0.3), fitted(0.03, 40_000, windows=3)]
)
def test_an_unconfident_or_thin_fit_moves_nothing(unusable: Fit) -> None:
    assert step(DEFAULT_PARAMETERS, unusable) is None


def test_pinned_parameters_are_never_stepped() -> None:
    assert step(TtftParameters(calibration="manual"), fitted(0.03, 40_000)) is None


def sample(at: float, requests: int, seconds: float, prompt: int) -> str:
    counters = {"prefill_seconds_count": requests, "prefill_seconds_sum": seconds,
                "prompt_tokens_total": prompt, "prefix_cache_hits_total": 0,
                "running": 0}  # fmt: skip
    return f"{at:.3f} {json.dumps(counters)}"


def slow_pod_samples(redis_client, pod: str, t0: float = 0.03, speed: float = 4000) -> None:
    """Two minutes of windows of a pod that is slower than the defaults say."""
    requests = seconds = prompt = 0.0
    for n in range(30):
        tokens = 200 + 150 * (n % 7)
        requests, prompt = requests + 2, prompt + 2 * tokens
        seconds += 2 * (t0 + tokens / speed)
        redis_client.lpush(
            keys.load_fit_samples_key(pod), sample(1000 + 2 * n, requests, seconds, prompt)
        )


@pytest.fixture
def slow_engine(db, redis_client):
    Engine.objects.create(pod="vllm-0", model="m", kind="vllm", events_endpoint="tcp://127.0.0.1:1")
    slow_pod_samples(redis_client, "vllm-0")


@pytest.mark.django_db(transaction=True)
def test_a_run_appends_a_version_by_calibration_that_every_process_uses(
    version_one, slow_engine, fresh_weights
) -> None:
    result = calibrate()
    assert result["result"] == "changed"
    saved = current_version()
    assert (saved.version, saved.author) == (2, "calibration")
    assert saved.reason.startswith("calibration: pod vllm-0:")
    assert "confidence" in saved.reason
    fit = dict((pod, (t0, speed)) for pod, t0, speed in saved.weight_config.ttft.pod_fits)
    assert fit["vllm-0"][1] == round(10_000 / RULES.max_step), "one bounded step towards 4000"
    assert active_weights().version == 2, "published when the save committed"
    changes = [str(change) for change in history(1)[0].changes]
    assert any("pod vllm-0" in change for change in changes), "diffed like any version"
    for _ in range(8):  # more runs converge, then add nothing
        if calibrate()["result"] == "unchanged":
            break
    else:
        pytest.fail("calibration kept adding versions")
    speed = current_version().weight_config.ttft.pod_fits[0][2]
    assert speed == pytest.approx(4000, rel=0.1)


@pytest.mark.django_db(transaction=True)
def test_pinned_parameters_stop_calibration(version_one, slow_engine, fresh_weights) -> None:
    pinned = WeightConfig.from_json(version_one.config).with_ttft(
        TtftParameters(calibration="manual")
    )
    save_version(pinned, author="erin", reason="pinned for the benchmark", base_version=1)
    assert calibrate() == {"result": "manual", "version": 2}
    assert TierWeightsVersion.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_metrics_expose_the_active_version_and_the_runs(
    version_one, slow_engine, fresh_weights
) -> None:
    calibrate()
    calibrate()
    families = {family.name: family for family in IndexCollector().collect()}
    (active,) = families["kvadmin_weights_active_version"].samples
    assert active.value == current_version().version
    runs = {s.labels["result"]: s.value for s in families["kvadmin_calibration_runs"].samples}
    assert runs.get("changed") == 2
