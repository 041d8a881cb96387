"""A saved configuration is validated by the scoring rules, keeps only configured entries and
scores with them merged over kthena's defaults (compatibility.md 2.5)."""

import json
import math

import pytest

from kvadmin.weights.config import KTHENA_DEFAULTS, WeightConfig, diff
from scoring.weights import InvalidTierWeights
from tests.conftest import CONFORMANCE

WEIGHT_CONFIG = json.loads(CONFORMANCE.read_text())["weight_config"]


@pytest.mark.parametrize("case", WEIGHT_CONFIG, ids=lambda case: case["note"][:40])
def test_it_rejects_the_conformance_config_naming_every_bad_entry(case: dict) -> None:
    with pytest.raises(InvalidTierWeights) as raised:
        WeightConfig.validated(case["config"])
    assert set(raised.value.errors) == {"disk", "fs"}


@pytest.mark.parametrize("case", WEIGHT_CONFIG, ids=lambda case: case["note"][:40])
def test_the_valid_rest_scores_as_kthena_applies_it(case: dict) -> None:
    valid = {name: w for name, w in case["config"].items() if 0 <= w <= 1}
    weights = WeightConfig.validated(valid).tier_weights()
    assert weights.as_kthena_config() == case["kthena_effective"]


@pytest.mark.parametrize("weight", [1.5, -0.1, math.nan, math.inf, "0.5"])
def test_it_rejects_bad_weights(weight: object) -> None:
    with pytest.raises(InvalidTierWeights) as raised:
        WeightConfig.validated({"gpu": weight})
    assert set(raised.value.errors) == {"gpu"}


def test_it_rejects_names_differing_only_in_case() -> None:
    with pytest.raises(InvalidTierWeights) as raised:
        WeightConfig.validated({"Disk": 0.5, "disk ": 0.4})
    assert set(raised.value.errors) == {"Disk", "disk "}


def test_it_rejects_a_bad_fallback() -> None:
    with pytest.raises(InvalidTierWeights) as raised:
        WeightConfig.validated({}, fallback=1.2)
    assert set(raised.value.errors) == {"fallback"}


def test_it_keeps_names_normalized_and_sorted() -> None:
    config = WeightConfig.validated({" DISK ": 0.5, "Gpu": 1})
    assert list(config.weights.items()) == [("disk", 0.5), ("gpu", 1.0)]


def test_notes_follow_their_medium_and_blank_ones_go() -> None:
    config = WeightConfig.validated(
        {"disk": 0.5}, notes={"DISK": " local NVMe ", "gpu": "not configured", "x": " "}
    )
    assert dict(config.notes) == {"disk": "local NVMe"}


def test_a_stored_config_round_trips_through_json() -> None:
    config = WeightConfig.validated({"disk": 0.25}, 0.9, {"disk": "ssd"})
    assert WeightConfig.from_json(json.loads(json.dumps(config.to_json()))) == config


def test_a_tampered_stored_config_is_rejected() -> None:
    with pytest.raises(InvalidTierWeights):
        WeightConfig.from_json({"weights": {"gpu": 7}, "fallback": 1.0})


def test_unconfigured_defaults_still_score() -> None:
    weights = WeightConfig.validated({"disk": 0.5}).tier_weights()
    assert weights.weight_for("CPU") == 0.8
    assert weights.weight_for("DISK") == 0.5
    assert weights.weight_for("EXTERNAL") == 1.0


def test_the_spec_defaults_are_kthenas() -> None:
    assert dict(KTHENA_DEFAULTS.weights) == {"cpu": 0.8, "cpu_pinned": 0.8, "gpu": 1.0}
    assert KTHENA_DEFAULTS.fallback == 1.0


def test_the_diff_names_each_change() -> None:
    before = WeightConfig.validated({"gpu": 1.0, "cpu": 0.8}, notes={"cpu": "host"})
    after = WeightConfig.validated({"gpu": 1.0, "disk": 0.3}, 0.9)
    assert [str(change) for change in diff(before, after)] == [
        "removed cpu (was 0.8; now weighs the default 0.8)",
        "added disk = 0.3",
        "fallback 1 → 0.9",
    ]


def test_the_diff_of_a_changed_weight_and_note() -> None:
    before = WeightConfig.validated({"cpu": 0.8})
    after = WeightConfig.validated({"cpu": 0.5}, notes={"cpu": "slow PCIe"})
    assert [str(change) for change in diff(before, after)] == [
        "cpu 0.8 → 0.5",
        "cpu note “” → “slow PCIe”",
    ]
