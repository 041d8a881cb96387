"""One step of continuous calibration: from the parameters in effect towards a fit, within the
guard rails. Pure: no Django, no Redis (the bench runs it inside its simulation too).

Guard rails (issue 33 item 1):
- only lines with at least `min_windows` windows (engine windows and delivered outcomes) and a
  confidence of at least `min_confidence` (kvadmin.weights.fit.Line: robust Theil-Sen lines,
  implausible windows refused) move anything;
- each value moves at most a factor `max_step` per step (T0 also `t0_slack_s` either way, as a
  factor of a small T0 is no room), so one bad minute cannot throw the routing off;
- changes within `deadband` of the value in effect are left out, so a converged fit adds no
  versions;
- the result is built as `TtftParameters` (validated): a value that fails validation is never
  returned, the step is dropped instead;
- `manual` parameters (pinned by an operator) are never stepped.
"""

from dataclasses import dataclass, replace
from typing import Final

from kvadmin.weights.fit import Fit
from scoring.ttft import InvalidTtftParameters, TtftParameters


@dataclass(frozen=True, slots=True)
class Rules:
    min_windows: int = 6
    min_confidence: float = 0.6
    max_step: float = 1.5
    t0_slack_s: float = 0.005
    deadband: float = 0.08


RULES: Final = Rules()


@dataclass(frozen=True, slots=True)
class Step:
    parameters: TtftParameters
    changes: tuple[str, ...]
    """What moved, in words: "pod p: 10000 → 15000 tokens/s (fitted 18000, confidence 0.9)"."""
    confidence: float
    """The lowest confidence among the lines that moved something."""


def step(current: TtftParameters, fitted: Fit, rules: Rules = RULES) -> Step | None:
    """The next parameters, or None when nothing moves (or the parameters are pinned)."""
    if current.calibration == "manual":
        return None
    changes: list[str] = []
    confidences: list[float] = []
    pods = {pod: (t0, speed) for pod, t0, speed in current.pod_fits}
    for pod_fit in fitted.pods:
        line = pod_fit.line
        if line is None or line.windows < rules.min_windows:
            continue
        if line.confidence < rules.min_confidence:
            continue
        now = pods.get(pod_fit.pod)
        if now is None:
            now = (current.first_token_s, 1 / current.token_seconds(pod_fit.model))
        t0 = _toward(now[0], line.first_token_s, rules, additive=True)
        speed = round(_toward(now[1], line.tokens_per_s, rules))
        if not (_moved(now[0], t0, rules, 0.002) or _moved(now[1], speed, rules)):
            continue
        pods[pod_fit.pod] = (round(t0, 4), float(speed))
        confidences.append(line.confidence)
        changes.append(
            f"pod {pod_fit.pod}: T0 {now[0]:.4g} → {t0:.4g} s, {now[1]:.0f} → {speed:.0f} "
            f"tokens/s (fitted {line.first_token_s:.4g} s, {line.tokens_per_s:.0f}; "
            f"confidence {line.confidence:.2f})"
        )
    speeds = dict(current.prefill_tokens_per_s)
    for model in fitted.models:
        if model.tokens_per_s is None or model.windows + model.outcomes < rules.min_windows:
            continue
        if model.confidence < rules.min_confidence:
            continue
        now_speed = 1 / current.token_seconds(model.model)
        speed = round(_toward(now_speed, model.tokens_per_s, rules))
        if _moved(now_speed, speed, rules):
            speeds[model.model] = float(speed)
            confidences.append(model.confidence)
            changes.append(
                f"model {model.model}: {now_speed:.0f} → {speed:.0f} tokens/s "
                f"(fitted {model.tokens_per_s:.0f}; confidence {model.confidence:.2f})"
            )
    first_token_s = current.first_token_s
    if fitted.first_token_s is not None and confidences:
        pooled = _toward(first_token_s, fitted.first_token_s, rules, additive=True)
        if _moved(first_token_s, pooled, rules, 0.002):
            changes.append(f"pooled T0 {first_token_s:.4g} → {pooled:.4g} s")
            first_token_s = round(pooled, 4)
    if not changes:
        return None
    try:
        parameters = replace(
            current,
            first_token_s=first_token_s,
            prefill_tokens_per_s=tuple(sorted(speeds.items())),
            pod_fits=tuple((pod, t0, speed) for pod, (t0, speed) in sorted(pods.items())),
        )
    except InvalidTtftParameters:
        return None
    return Step(parameters, tuple(changes), min(confidences, default=0.0))


def _toward(now: float, target: float, rules: Rules, additive: bool = False) -> float:
    """`target`, bounded to a factor `max_step` of `now` (and `t0_slack_s` for a T0)."""
    slack = rules.t0_slack_s if additive else 0.0
    low, high = now / rules.max_step - slack, now * rules.max_step + slack
    return min(max(target, low, 0.0), high)


def _moved(before: float, after: float, rules: Rules, floor: float = 0.0) -> bool:
    return abs(after - before) > max(rules.deadband * abs(before), floor)
