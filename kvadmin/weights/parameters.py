"""The `ttft` policy's parameters (scoring.ttft.TtftParameters) as a saved version holds them.

They are versioned with the tier weights (one version = weights + parameters), so one history,
one restore and one what-if cover both: the weights price a lower-tier hit's reload, the
parameters turn tokens into seconds, and a decision depends on both.

Stored as JSON under the version's "ttft" key; a version saved before parameters existed has
none and means the documented defaults (scoring.ttft).
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scoring.ttft import DEFAULT_PARAMETERS, InvalidTtftParameters, TtftParameters

SCALARS: tuple[tuple[str, str], ...] = (
    ("first_token_s", "T0 (s)"),
    ("default_prefill_tokens_per_s", "prefill tokens/s, other models"),
    ("kappa", "kappa (work penalty)"),
    ("decode_slowdown", "decode slowdown per running request"),
)
"""The scalar fields, in the page's order, with the words the page and the history use."""

LABELS = dict(SCALARS)


def speed_label(model: str) -> str:
    return f"prefill tokens/s of {model}"


def pod_label(pod: str) -> str:
    return f"T0 (s) and prefill tokens/s of pod {pod}"


def to_json(parameters: TtftParameters) -> dict[str, Any]:
    data: dict[str, Any] = {name: getattr(parameters, name) for name, _ in SCALARS}
    data["prefill_tokens_per_s"] = dict(parameters.prefill_tokens_per_s)
    data["pod_fits"] = {pod: [t0, speed] for pod, t0, speed in parameters.pod_fits}
    data["calibration"] = parameters.calibration
    return data


def from_json(data: Mapping[str, Any] | None) -> TtftParameters:
    """Stored parameters (validated: stored JSON is input too); None or {} are the defaults.
    Raises scoring.ttft.InvalidTtftParameters (a ValueError)."""
    if not data:
        return DEFAULT_PARAMETERS
    known = {name: data[name] for name, _ in SCALARS if name in data}
    speeds = data.get("prefill_tokens_per_s", {})
    pods = data.get("pod_fits", {})
    if not isinstance(pods, Mapping) or not all(isinstance(v, list) for v in pods.values()):
        raise InvalidTtftParameters({"pod_fits": "must map pods to [T0, tokens per second]"})
    return TtftParameters(
        **known,  # type: ignore[arg-type]
        prefill_tokens_per_s=speeds,
        pod_fits=pods,  # type: ignore[arg-type]
        calibration=data.get("calibration", "auto"),
    )


def number_text(value: float) -> str:
    """The shortest text that reads back as the same float ("1.5", "10000")."""
    return repr(float(value)).removesuffix(".0")


@dataclass(frozen=True, slots=True)
class ParameterChange:
    """One parameter that differs between two versions; None: not set (a model's speed)."""

    label: str
    before: float | str | None
    after: float | str | None

    def __str__(self) -> str:
        before, after = _text(self.before), _text(self.after)
        if self.before is None:
            return f"added {self.label} = {after}"
        if self.after is None:
            return f"removed {self.label} (was {before})"
        return f"{self.label} {before} → {after}"


def _text(value: float | str | None) -> str:
    return value if isinstance(value, str) or value is None else number_text(value)  # type: ignore[return-value]


def diff(before: TtftParameters, after: TtftParameters) -> list[ParameterChange]:
    changes = [
        ParameterChange(label, getattr(before, name), getattr(after, name))
        for name, label in SCALARS
        if getattr(before, name) != getattr(after, name)
    ]
    old, new = dict(before.prefill_tokens_per_s), dict(after.prefill_tokens_per_s)
    changes += [
        ParameterChange(speed_label(model), old.get(model), new.get(model))
        for model in sorted(old.keys() | new.keys())
        if old.get(model) != new.get(model)
    ]
    old_pods = {pod: (t0, speed) for pod, t0, speed in before.pod_fits}
    new_pods = {pod: (t0, speed) for pod, t0, speed in after.pod_fits}
    changes += [
        ParameterChange(pod_label(pod), _pair(old_pods.get(pod)), _pair(new_pods.get(pod)))
        for pod in sorted(old_pods.keys() | new_pods.keys())
        if old_pods.get(pod) != new_pods.get(pod)
    ]
    if before.calibration != after.calibration:
        changes.append(ParameterChange("calibration", before.calibration, after.calibration))
    return changes


def _pair(fit: tuple[float, float] | None) -> str | None:
    return None if fit is None else f"{number_text(fit[0])} s, {number_text(fit[1])}/s"
