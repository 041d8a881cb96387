"""Where calibration stands: what the evidence fits (kvadmin.weights.evidence), beside the
parameters in effect, per model and per pod, with the fit's quality and whether the guard rails
let the next run move it. /weights/ shows it on every load: the operator sees what calibration
sees without clicking "Fit"."""

from dataclasses import dataclass, field

import redis

from kvadmin.weights.calibration_step import RULES, Rules
from kvadmin.weights.evidence import evidence_fit
from kvadmin.weights.fit import Fit
from kvadmin.weights.models import TierWeightsVersion
from scoring.ttft import TtftParameters


@dataclass(frozen=True, slots=True)
class Compared:
    """One model's or pod's parameters: active against fitted."""

    name: str
    active_t0: float
    active_speed: float
    own: bool
    """The active figures are its own (a pod fit, a model speed), not the pooled ones."""
    fitted_t0: float | None
    fitted_speed: float | None
    windows: int
    """Engine windows."""
    outcomes: int
    """Delivered outcomes."""
    confidence: float
    error: float | None
    """The fit's median abs(predicted - measured) / measured."""
    note: str = ""

    @property
    def error_percent(self) -> float | None:
        return None if self.error is None else self.error * 100

    @property
    def speed_ratio(self) -> float | None:
        """Fitted over active speed: above 1, the pod prefills faster than the version says."""
        if self.fitted_speed is None or not self.active_speed:
            return None
        return self.fitted_speed / self.active_speed

    def usable(self, rules: Rules = RULES) -> bool:
        """Enough evidence and confidence for calibration to step towards it."""
        return (
            self.fitted_speed is not None
            and self.windows + self.outcomes >= rules.min_windows
            and self.confidence >= rules.min_confidence
        )


@dataclass(frozen=True, slots=True)
class Standing:
    version: int
    calibration: str
    """"auto" or "manual" (pinned)."""
    pooled_t0: float
    fitted_pooled_t0: float | None
    models: list[Compared] = field(default_factory=list)
    pods: list[Compared] = field(default_factory=list)
    refused: int = 0
    skipped: list[str] = field(default_factory=list)
    unavailable: str = ""
    """Why nothing could be fitted (the index does not answer)."""


def standing(client: redis.Redis, current: TierWeightsVersion) -> Standing:
    config = current.weight_config
    active = config.ttft
    try:
        fitted = evidence_fit(client, config)
    except redis.RedisError as error:
        return Standing(
            current.version,
            active.calibration,
            active.first_token_s,
            None,
            unavailable=f"the index is unavailable: {str(error)[:200]}",
        )
    return Standing(
        current.version,
        active.calibration,
        active.first_token_s,
        fitted.first_token_s,
        _models(active, fitted),
        _pods(active, fitted),
        fitted.refused,
        fitted.skipped,
    )


def _models(active: TtftParameters, fitted: Fit) -> list[Compared]:
    own = dict(active.prefill_tokens_per_s)
    return [
        Compared(
            name=model.model,
            active_t0=active.first_token_s,
            active_speed=1 / active.token_seconds(model.model),
            own=model.model in own,
            fitted_t0=model.intercept_s,
            fitted_speed=model.tokens_per_s,
            windows=model.windows,
            outcomes=model.outcomes,
            confidence=model.confidence,
            error=model.error,
            note=model.note,
        )
        for model in fitted.models
    ]


def _pods(active: TtftParameters, fitted: Fit) -> list[Compared]:
    own = {pod: (t0, speed) for pod, t0, speed in active.pod_fits}
    compared = []
    for pod in fitted.pods:
        t0, speed = own.get(pod.pod, (active.first_token_s, 1 / active.token_seconds(pod.model)))
        line = pod.line
        compared.append(
            Compared(
                name=pod.pod,
                active_t0=t0,
                active_speed=speed,
                own=pod.pod in own,
                fitted_t0=None if line is None else line.first_token_s,
                fitted_speed=None if line is None else line.tokens_per_s,
                windows=0 if line is None else line.windows - pod.outcomes,
                outcomes=pod.outcomes,
                confidence=0.0 if line is None else line.confidence,
                error=None if line is None else line.error,
                note="" if line is not None else "too little evidence: the model's figures apply",
            )
        )
    return compared
