"""A tier-weight configuration with any bad entry is rejected whole, naming every bad entry
(compatibility.md 2.5: kthena silently ignores them; kvadmin must not)."""

import contextlib
import math
from decimal import Decimal

import pytest

from scoring.weights import InvalidTierWeights, TierWeights
from tests.scoring.vectors import KTHENA

WEIGHT_CONFIG = KTHENA["weight_config"][0]


def rejection(config: dict[object, object], fallback: object = 1.0) -> InvalidTierWeights:
    with pytest.raises(InvalidTierWeights) as raised:
        TierWeights.from_config(config, fallback)  # type: ignore[arg-type]
    return raised.value


def test_it_rejects_the_whole_config_naming_disk_and_fs() -> None:
    error = rejection(WEIGHT_CONFIG["config"])
    assert set(error.errors) == {"disk", "fs"}
    assert "'disk'" in str(error) and "'fs'" in str(error)


def test_what_kthena_would_apply_is_the_valid_rest_over_the_defaults() -> None:
    valid = {name: w for name, w in WEIGHT_CONFIG["config"].items() if name not in {"disk", "fs"}}
    weights = TierWeights.from_config(valid)
    assert weights.as_kthena_config() == WEIGHT_CONFIG["kthena_effective"]


def test_the_error_is_a_value_error() -> None:
    assert isinstance(rejection({"gpu": 2}), ValueError)


def test_it_rejects_weight_above_one() -> None:
    assert "between 0 and 1" in rejection({"gpu": 1.0000001}).errors["gpu"]


def test_it_rejects_negative_weight() -> None:
    assert "between 0 and 1" in rejection({"cpu": -0.1}).errors["cpu"]


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, Decimal("NaN"), 10**400])
def test_it_rejects_nan_and_infinite_weights(value: object) -> None:
    assert set(rejection({"gpu": value}).errors) == {"gpu"}


@pytest.mark.parametrize("value", [True, False, "0.5", "nan", None, [0.5]])
def test_it_rejects_weights_that_are_not_numbers(value: object) -> None:
    """Text is rejected too: forms turn text into numbers and can point at the field."""
    assert "must be a number" in rejection({"gpu": value}).errors["gpu"]


@pytest.mark.parametrize("name", ["", "   "])
def test_it_rejects_empty_and_blank_names(name: str) -> None:
    assert rejection({name: 0.5}).errors == {name: "the name is empty"}


def test_it_rejects_names_equal_after_trimming_and_case() -> None:
    errors = rejection({"GPU": 1.0, " gpu": 0.9, "cpu": 0.8}).errors
    assert set(errors) == {"GPU", " gpu"}
    assert "' gpu'" in errors["GPU"]


def test_it_rejects_names_that_are_not_text() -> None:
    assert set(rejection({1: 0.5}).errors) == {"1"}


def test_it_names_every_problem_of_one_entry() -> None:
    errors = rejection({"GPU": 1.0, "gpu": 7}).errors
    assert "between 0 and 1" in errors["gpu"] and "'GPU'" in errors["gpu"]


@pytest.mark.parametrize("fallback", [1.5, -1, math.nan, "1"])
def test_it_rejects_a_bad_fallback(fallback: object) -> None:
    assert set(rejection({}, fallback).errors) == {"fallback"}


@pytest.mark.parametrize("value", [0, 1, 0.0, 1.0, Decimal("0.8"), -0.0])
def test_it_accepts_the_closed_range(value: object) -> None:
    weight = TierWeights.from_config({"disk": value}).weight_for("DISK")  # type: ignore[dict-item]
    assert weight == float(value)  # type: ignore[arg-type]
    assert math.copysign(1.0, weight) == 1.0


def test_invalid_weights_leave_the_active_weights_unchanged() -> None:
    active = TierWeights.from_config({"gpu": 0.9})
    with contextlib.suppress(InvalidTierWeights):
        active = TierWeights.from_config({"gpu": 0.5, "disk": 3})
    assert active == TierWeights.from_config({"gpu": 0.9})
    assert active.weight_for("GPU") == 0.9


def test_it_cannot_be_changed_in_place() -> None:
    weights = TierWeights()
    with pytest.raises(AttributeError):
        weights._fallback = 0.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        weights.weights["gpu"] = 0.0  # type: ignore[index]
    with pytest.raises(TypeError):
        TierWeights.from_config([("gpu", 1.0)])  # type: ignore[arg-type]
