"""The prefill-time model behind the `ttft` policy: how long a pod would take to produce the first
token of a request, given what it holds and what it is already doing.

For one request on one pod:

    S_est = T0 + t_tok * slowdown * (uncached_tokens + reload_tokens)
    reload_tokens = sum over the pod's matched blocks of (1 - w_medium) * block_tokens
    slowdown = 1 + decode_slowdown * running_requests

`t_tok` is 1 / (prefill tokens per second of the model), and T0 the pooled one; a pod that
calibration fitted on its own (`pod_fits`: pods of one model often run on different GPUs) uses
its own T0 and speed instead. The tier weight is what a hit is worth
(compatibility.md 2.5: GPU 1.0, host memory 0.8, ...), so `1 - w` is the fraction of a block's
prefill it still costs to load it back from a lower tier. Running requests decode in the same
forward passes as the prefill (chunked prefill / continuous batching), so each one slows the prefill
a little.

Pure: no Django, no Redis. The parameters are validated once, in the constructor, and never change
afterwards, as `TierWeights` does.
"""

import math
import numbers
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from scoring.score import MediaRun
from scoring.weights import TierWeights

DEFAULT_FIRST_TOKEN_S: Final = 0.015
"""T0: scheduling, one decode step and the sampling of the first token, whatever the prompt."""
DEFAULT_PREFILL_TOKENS_PER_S: Final = 10_000.0
"""An 8B model on one current datacenter GPU prefills on the order of 10k tokens/s."""
DEFAULT_KAPPA: Final = 1.5
"""How much a placement's extra prefill work counts beyond its own TTFT when no queue forms:
the work also delays the later requests of its prefix (the policy adds the requests queued on
the pod, `scoring.policy`). 0 is greedy TTFT, which over-spreads. 1.5 is the value
`bench/routing_quality.py` found best at low load (2 and more keep hot prefixes on busy pods)."""
DEFAULT_DECODE_SLOWDOWN: Final = 0.02
"""Per running request: 2% slower prefill, a typical cost of a decode batch sharing the step."""
MAX_SECONDS: Final = 3600.0
MAX_TOKENS_PER_S: Final = 1e8
MAX_KAPPA: Final = 100.0
MAX_MODELS: Final = 1000
MAX_PODS: Final = 10_000
CALIBRATION_MODES: Final = ("auto", "manual")
"""`auto`: the calibration task may append versions with fitted values; `manual`: the operator
pinned the parameters, calibration leaves them alone."""


class InvalidTtftParameters(ValueError):
    """A parameter set with at least one bad entry; `errors` maps each bad field to the reason."""

    def __init__(self, errors: Mapping[str, str]) -> None:
        self.errors = dict(errors)
        details = "; ".join(f"{name!r}: {reason}" for name, reason in self.errors.items())
        super().__init__(f"invalid TTFT parameters, nothing applied: {details}")


@dataclass(frozen=True, slots=True)
class TtftParameters:
    """The prefill-time model's parameters (see the module docstring), validated on creation.

    `prefill_tokens_per_s` maps a model name to its measured prefill speed; other models use
    `default_prefill_tokens_per_s`. It is stored as sorted (model, speed) pairs so the
    parameters stay immutable and hashable.
    """

    first_token_s: float = DEFAULT_FIRST_TOKEN_S
    default_prefill_tokens_per_s: float = DEFAULT_PREFILL_TOKENS_PER_S
    prefill_tokens_per_s: tuple[tuple[str, float], ...] = field(default=())
    kappa: float = DEFAULT_KAPPA
    decode_slowdown: float = DEFAULT_DECODE_SLOWDOWN
    pod_fits: tuple[tuple[str, float, float], ...] = field(default=())
    """(pod, T0, prefill tokens per second) of pods fitted on their own, sorted by pod."""
    calibration: str = "auto"
    """One of CALIBRATION_MODES."""
    _pods: dict[str, tuple[float, float]] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )

    def __post_init__(self) -> None:
        errors: dict[str, str] = {}
        _check(errors, "first_token_s", self.first_token_s, 0.0, MAX_SECONDS)
        _check(
            errors,
            "default_prefill_tokens_per_s",
            self.default_prefill_tokens_per_s,
            0.0,
            MAX_TOKENS_PER_S,
            exclusive_low=True,
        )
        _check(errors, "kappa", self.kappa, 0.0, MAX_KAPPA)
        _check(errors, "decode_slowdown", self.decode_slowdown, 0.0, 10.0)
        speeds = _model_speeds(errors, self.prefill_tokens_per_s)
        pods = _pod_fits(errors, self.pod_fits)
        if self.calibration not in CALIBRATION_MODES:
            errors["calibration"] = f"must be one of {', '.join(CALIBRATION_MODES)}"
        if errors:
            raise InvalidTtftParameters(errors)
        for name in ("first_token_s", "default_prefill_tokens_per_s", "kappa", "decode_slowdown"):
            object.__setattr__(self, name, float(getattr(self, name)))
        object.__setattr__(self, "prefill_tokens_per_s", speeds)
        object.__setattr__(self, "pod_fits", pods)
        object.__setattr__(self, "_pods", {pod: (t0, speed) for pod, t0, speed in pods})

    def fitted_alone(self, pod: str) -> bool:
        """Whether `pod` has its own fit (else it is priced with its model's figures)."""
        return pod in self._pods

    def token_seconds(self, model: str, pod: str | None = None) -> float:
        """t_tok: seconds to prefill one token of `model` (on `pod`, when it has its own fit)."""
        own = self._pods.get(pod) if pod is not None else None
        if own is not None:
            return 1.0 / own[1]
        for name, speed in self.prefill_tokens_per_s:
            if name == model:
                return 1.0 / speed
        return 1.0 / self.default_prefill_tokens_per_s

    def first_token(self, pod: str | None = None) -> float:
        """T0 of `pod` (its own fit), else the pooled one."""
        own = self._pods.get(pod) if pod is not None else None
        return own[0] if own is not None else self.first_token_s


@dataclass(frozen=True, slots=True)
class PrefillEstimate:
    """One pod's predicted prefill of one request, in the model's terms."""

    cached_tokens: int
    uncached_tokens: int
    reload_tokens: float
    """Lower-tier hits, priced as the prefill tokens their reload costs."""
    seconds: float
    """S_est."""
    reload_seconds: float
    """The part of S_est spent reloading lower-tier hits."""

    def scaled(self, factor: float, offset_s: float = 0.0) -> "PrefillEstimate":
        """The estimate with its seconds times `factor`, plus `offset_s`: a pod's delivered
        correction (scoring.route_state, `PrefillFit`), which calibration's parameters have
        not caught up with yet. Never below half the factor's alone (a negative offset is a
        T0 over-estimated, not a prefill that takes no time)."""
        if factor == 1.0 and offset_s == 0.0:
            return self
        seconds = self.seconds * factor
        return PrefillEstimate(
            self.cached_tokens,
            self.uncached_tokens,
            self.reload_tokens,
            max(seconds + offset_s, seconds / 2),
            self.reload_seconds * factor,
        )


def estimate_prefill(
    model: str,
    prompt_tokens: int,
    runs: Iterable[MediaRun],
    block_size: int,
    running: int,
    weights: TierWeights,
    parameters: TtftParameters,
    pod: str | None = None,
) -> PrefillEstimate:
    """S_est for a prompt of `prompt_tokens` on a pod whose matched blocks (in block order, as
    runs of media) are `runs`.

    Engines always recompute at least the last prompt token, and a hit never covers more than
    the prompt (the request's last block may be partial), so cached tokens are capped at
    `prompt_tokens - 1`; the cap is taken off the end of the match, the last blocks matched.
    """
    cap = max(prompt_tokens - 1, 0)
    cached = 0
    reload = 0.0
    for medium, count in runs:
        tokens = min(count * block_size, cap - cached)
        if tokens <= 0:
            break
        cached += tokens
        reload += (1.0 - weights.weight_for(medium)) * tokens
    uncached = max(prompt_tokens, 0) - cached
    slowdown = 1.0 + parameters.decode_slowdown * max(running, 0)
    scale = parameters.token_seconds(model, pod) * slowdown
    return PrefillEstimate(
        cached_tokens=cached,
        uncached_tokens=uncached,
        reload_tokens=reload,
        seconds=parameters.first_token(pod) + scale * (uncached + reload),
        reload_seconds=scale * reload,
    )


def _check(
    errors: dict[str, str],
    name: str,
    value: object,
    low: float,
    high: float,
    exclusive_low: bool = False,
) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        errors[name] = f"must be a number, got {type(value).__name__} {value!r}"
        return
    number = float(value)
    too_low = number <= low if exclusive_low else number < low
    if math.isnan(number) or too_low or number > high:
        bound = f"above {low:g}" if exclusive_low else f"at least {low:g}"
        errors[name] = f"must be {bound} and at most {high:g}, got {value!r}"


def _model_speeds(errors: dict[str, str], given: object) -> tuple[tuple[str, float], ...]:
    """`prefill_tokens_per_s` as sorted pairs; a mapping is accepted too (model -> speed)."""
    pairs = given.items() if isinstance(given, Mapping) else given
    try:
        entries = list(pairs)  # type: ignore[call-overload]
    except TypeError:
        errors["prefill_tokens_per_s"] = "must map model names to tokens per second"
        return ()
    if len(entries) > MAX_MODELS:
        errors["prefill_tokens_per_s"] = f"at most {MAX_MODELS} models"
        return ()
    speeds: dict[str, float] = {}
    for entry in entries:
        if not (isinstance(entry, tuple | list) and len(entry) == 2):
            errors["prefill_tokens_per_s"] = (
                f"entries are (model, tokens per second), got {entry!r}"
            )
            continue
        model, speed = entry
        key = f"prefill_tokens_per_s[{model!r}]"
        if not isinstance(model, str) or not model.strip():
            errors[key] = "the model name must be non-empty text"
            continue
        if model in speeds:
            errors[key] = "the model is given twice"
            continue
        _check(errors, key, speed, 0.0, MAX_TOKENS_PER_S, exclusive_low=True)
        if key not in errors:
            speeds[model] = float(speed)  # type: ignore[arg-type]
    return tuple(sorted(speeds.items()))


def _pod_fits(errors: dict[str, str], given: object) -> tuple[tuple[str, float, float], ...]:
    """`pod_fits` as sorted triples; a mapping pod -> (T0, speed) is accepted too."""
    items = given.items() if isinstance(given, Mapping) else given
    try:
        entries = [
            (entry[0], *entry[1]) if isinstance(given, Mapping) else tuple(entry)  # type: ignore[index]
            for entry in items  # type: ignore[union-attr]
        ]
    except TypeError:
        errors["pod_fits"] = "must list (pod, T0, tokens per second)"
        return ()
    if len(entries) > MAX_PODS:
        errors["pod_fits"] = f"at most {MAX_PODS} pods"
        return ()
    fits: dict[str, tuple[float, float]] = {}
    for entry in entries:
        if len(entry) != 3 or not isinstance(entry[0], str) or not entry[0].strip():
            errors["pod_fits"] = f"entries are (pod, T0, tokens per second), got {entry!r}"
            continue
        pod, t0, speed = entry
        key = f"pod_fits[{pod!r}]"
        if pod in fits:
            errors[key] = "the pod is given twice"
            continue
        _check(errors, f"{key}.first_token_s", t0, 0.0, MAX_SECONDS)
        _check(errors, f"{key}.tokens_per_s", speed, 0.0, MAX_TOKENS_PER_S, exclusive_low=True)
        if not {f"{key}.first_token_s", f"{key}.tokens_per_s"} & errors.keys():
            fits[pod] = (float(t0), float(speed))
    return tuple((pod, t0, speed) for pod, (t0, speed) in sorted(fits.items()))


DEFAULT_PARAMETERS: Final = TtftParameters()
