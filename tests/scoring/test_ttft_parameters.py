"""The TTFT model's parameters: documented defaults, validated once, immutable."""

import dataclasses

import pytest

from scoring.ttft import (
    DEFAULT_PARAMETERS,
    DEFAULT_PREFILL_TOKENS_PER_S,
    InvalidTtftParameters,
    TtftParameters,
    estimate_prefill,
)
from scoring.weights import TierWeights


def test_unknown_models_prefill_at_the_default_speed() -> None:
    parameters = TtftParameters(prefill_tokens_per_s={"big": 2000.0})
    assert parameters.token_seconds("big") == 1 / 2000
    assert parameters.token_seconds("other") == 1 / DEFAULT_PREFILL_TOKENS_PER_S
    assert parameters.prefill_tokens_per_s == (("big", 2000.0),)


def test_it_names_every_bad_parameter() -> None:
    with pytest.raises(InvalidTtftParameters) as raised:
        TtftParameters(
            first_token_s=-1,
            default_prefill_tokens_per_s=0,
            kappa=float("nan"),
            decode_slowdown=True,
            prefill_tokens_per_s={"": 5.0, "m": "fast"},
        )
    assert set(raised.value.errors) == {
        "first_token_s",
        "default_prefill_tokens_per_s",
        "kappa",
        "decode_slowdown",
        "prefill_tokens_per_s['']",
        "prefill_tokens_per_s['m']",
    }


def test_it_rejects_infinite_speed() -> None:
    with pytest.raises(InvalidTtftParameters, match="default_prefill_tokens_per_s"):
        TtftParameters(default_prefill_tokens_per_s=float("inf"))


def test_parameters_are_immutable_and_hashable() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT_PARAMETERS.kappa = 2.0  # type: ignore[misc]
    assert hash(TtftParameters(prefill_tokens_per_s={"m": 1.0})) == hash(
        TtftParameters(prefill_tokens_per_s=[("m", 1)])
    )


def test_the_estimate_prices_uncached_tokens_reloads_and_running_requests() -> None:
    parameters = TtftParameters(first_token_s=0.01, decode_slowdown=0.5)
    weights = TierWeights.from_config({"cpu": 0.75})
    estimate = estimate_prefill("m", 100, [("GPU", 2), ("CPU", 2)], 16, 2, weights, parameters)
    assert (estimate.cached_tokens, estimate.uncached_tokens) == (64, 36)
    assert estimate.reload_tokens == 8.0
    t_tok = 2.0 / DEFAULT_PREFILL_TOKENS_PER_S
    assert estimate.seconds == pytest.approx(0.01 + t_tok * 44)
    assert estimate.reload_seconds == pytest.approx(t_tok * 8)
