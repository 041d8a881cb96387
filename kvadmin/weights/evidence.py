"""What calibration fits from, and what /weights/ shows beside the active parameters: the
engines' prefill counters (kvadmin.weights.fit) and the delivered outcomes (TTFT, cached and
prompt tokens, from the outcome API and the endpoint picker: kvadmin.routing.prediction_error).

An outcome is one request's window: its computed tokens (prompt - cached), its lower-tier hits
(the cached tokens in the share of lower-tier blocks its pod was priced with) and its prefill
time (the delivered TTFT less the predicted wait). Outcomes whose predicted wait is more than
WAIT_SHARE of their TTFT are left out: there the wait estimate's own error would be fitted as
prefill. Outcomes of pods that are not enabled engines of the decision's model are ignored.
How much an outcome weighs is fit.fit's rule: one line per requester and pod, one vote each.
The outcomes are folded as they arrive into a bounded window kept in Redis (kvadmin.weights.
evidence_window), so a fit reads only what arrived since the last one.
"""

from collections.abc import Sequence
from typing import Final

import redis

from kvadmin.engines.models import Engine
from kvadmin.routing.prediction_error import Delivered
from kvadmin.weights.config import WeightConfig
from kvadmin.weights.evidence_window import Followed, follow
from kvadmin.weights.fit import PLAUSIBLE, Fit, Window, fit_from_engines
from scoring.policy import SPECULATIVE_MEDIUM
from scoring.weights import normalize_name

WAIT_SHARE: Final = 0.25


def evidence_fit(client: redis.Redis, config: WeightConfig) -> Fit:
    """The fit of the enabled engines' counters and their recent outcomes, with `config`'s
    parameters as the base and its lower-tier weight as the reload cost."""
    return followed_fit(client, config)[0]


def followed_fit(client: redis.Redis, config: WeightConfig) -> tuple[Fit, Followed]:
    """`evidence_fit`, and what folding the outcomes that arrived since the last fit found
    (kvadmin.weights.evidence_window)."""
    engines = list(Engine.objects.filter(enabled=True).values_list("pod", "model", "kind"))
    reload = 1.0 - config.tier_weights().weight_for("CPU")
    served = {(pod, model) for pod, model, _ in engines}
    followed = follow(client, served, outcome_window)
    fitted = fit_from_engines(client, engines, config.ttft, reload, followed.reported)
    return fitted, followed


def outcome_window(item: Delivered) -> Window | None:
    """One outcome as a window of one request; None when it cannot time a prefill."""
    estimate = item.estimate
    prefill_s = item.ttft_s - estimate.wait_s
    if estimate.wait_s > WAIT_SHARE * item.ttft_s:
        return None
    if not 0 < prefill_s <= PLAUSIBLE.prefill_s_per_request:
        return None
    cached = min(item.cached_tokens, item.prompt_tokens)
    return Window(
        requests=1.0,
        computed_tokens=float(item.prompt_tokens - cached),
        prefill_s=prefill_s,
        running=float(estimate.running),
        lower_hits=cached * _lower_share(estimate.runs),
    )


def _lower_share(runs: Sequence[tuple[str | None, int]]) -> float:
    """The share of the priced blocks outside the GPU (where speculative blocks count)."""
    gpu = normalize_name(SPECULATIVE_MEDIUM)
    blocks = sum(count for _, count in runs)
    lower = sum(count for medium, count in runs if normalize_name(medium or "") != gpu)
    return lower / blocks if blocks else 0.0
