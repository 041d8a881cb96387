"""Warnings about a configuration that is valid but probably not what the operator means.

- A slower tier outweighs a faster one: a hit that must first be copied back from a slower
  medium is worth more than one in a faster medium (e.g. DISK at kthena's 1.0 fallback above
  CPU at 0.8), so the router prefers the pod that would serve the request more slowly. The
  physical order is the one of the media table (scoring.weights.MEDIA: kvadmin's defaults
  weigh every medium by where it sits).
- A medium seen in the index is not configured: the engines report it and it silently weighs
  the fallback.

Only media that matter are compared: configured ones, kthena's defaults and media seen in the
index.
"""

from collections.abc import Mapping

from kvadmin.weights.config import WeightConfig, weight_text
from kvadmin.weights.seen import SeenMedium
from scoring.weights import DEFAULT_WEIGHTS, KVADMIN_WEIGHTS


def warnings(config: WeightConfig, seen: Mapping[str, SeenMedium]) -> list[str]:
    return tier_order_warnings(config, seen) + unconfigured_warnings(config, seen)


def tier_order_warnings(config: WeightConfig, seen: Mapping[str, SeenMedium]) -> list[str]:
    weights = config.tier_weights()
    relevant = sorted(
        name
        for name in {*config.weights, *DEFAULT_WEIGHTS, *seen}
        if name in KVADMIN_WEIGHTS  # a physical place in the media table
    )
    found = []
    for slow in relevant:
        faster = [
            fast
            for fast in relevant
            if KVADMIN_WEIGHTS[fast] > KVADMIN_WEIGHTS[slow]
            and weights.weight_for(slow) > weights.weight_for(fast)
        ]
        if faster:
            listed = ", ".join(
                f"{fast} ({weight_text(weights.weight_for(fast))})" for fast in faster
            )
            found.append(
                f"{slow} weighs {weight_text(weights.weight_for(slow))}"
                f"{_origin(slow, config)}, more than the faster {listed}: a hit there would "
                "be preferred over a faster one"
            )
    return found


def unconfigured_warnings(config: WeightConfig, seen: Mapping[str, SeenMedium]) -> list[str]:
    return [
        f"{name} is in the index ({len(entry.pods)} pod{'s' if len(entry.pods) != 1 else ''}) "
        f"but not configured: it weighs the fallback {weight_text(config.fallback)}"
        for name, entry in seen.items()
        if name and name not in config.weights and name not in DEFAULT_WEIGHTS
    ]


def _origin(name: str, config: WeightConfig) -> str:
    if name in config.weights:
        return ""
    if name in DEFAULT_WEIGHTS:
        return " (kthena default)"
    return " (the fallback)"


def inverts_physical_order(config: WeightConfig) -> bool:
    """Some medium of the media table, seen or not, outweighs a faster one (kthena's defaults:
    DISK at the 1.0 fallback above host memory): /weights/ offers kvadmin's physical defaults
    as a draft."""
    weights = config.tier_weights()
    return any(
        KVADMIN_WEIGHTS[fast] > KVADMIN_WEIGHTS[slow]
        and weights.weight_for(slow) > weights.weight_for(fast)
        for slow in KVADMIN_WEIGHTS
        for fast in KVADMIN_WEIGHTS
    )
