"""Weights per medium: defaults, merging, names, fallback, export (compatibility.md 2.5)."""

import pickle

from scoring.weights import DEFAULT_WEIGHTS, MEDIA, TierWeights


def test_it_starts_from_kthenas_defaults() -> None:
    weights = TierWeights()
    assert dict(weights.weights) == {"cpu": 0.8, "cpu_pinned": 0.8, "gpu": 1.0}
    assert weights.weights == DEFAULT_WEIGHTS
    assert weights.fallback == 1.0


def test_the_defaults_come_from_the_media_table() -> None:
    assert {m.name.lower(): m.default_weight for m in MEDIA if m.default_weight} == DEFAULT_WEIGHTS


def test_configured_entries_merge_over_the_defaults() -> None:
    weights = TierWeights.from_config({"CPU": 0.5, "disk": 0.2})
    assert weights.weight_for("GPU") == 1.0
    assert weights.weight_for("CPU") == 0.5
    assert weights.weight_for("CPU_PINNED") == 0.8
    assert weights.weight_for("DISK") == 0.2


def test_it_matches_names_ignoring_case_and_surrounding_spaces() -> None:
    weights = TierWeights.from_config({" Cpu_Pinned ": 0.5})
    assert weights.weight_for("CPU_PINNED") == weights.weight_for(" cpu_pinned") == 0.5


def test_missing_empty_and_unknown_media_weigh_the_fallback() -> None:
    weights = TierWeights()
    assert weights.weight_for(None) == weights.weight_for("") == 1.0
    assert weights.weight_for("SHARED_STORAGE") == weights.weight_for("  ") == 1.0


def test_operators_may_change_the_fallback() -> None:
    weights = TierWeights.from_config({}, fallback=0.3)
    assert weights.weight_for("EXTERNAL") == weights.weight_for(None) == 0.3
    assert weights.weight_for("GPU") == 1.0
    assert not weights.kthena_compatible
    assert TierWeights().kthena_compatible


def test_it_exports_the_router_config_with_lower_case_names() -> None:
    exported = TierWeights.from_config({"DISK": 0.1, "Gpu": 0.9}).as_kthena_config()
    assert exported == {"cpu": 0.8, "cpu_pinned": 0.8, "disk": 0.1, "gpu": 0.9}


def test_equal_effective_weights_are_equal_however_they_were_written() -> None:
    explicit = TierWeights.from_config({"GPU": 1, "disk": 0.5, "cpu": 0.8})
    implicit = TierWeights.from_config({" Disk": 0.5})
    assert explicit == implicit
    assert hash(explicit) == hash(implicit)
    assert explicit != TierWeights.from_config({"disk": 0.5}, fallback=0.9)


def test_it_survives_pickling() -> None:
    weights = TierWeights.from_config({"disk": 0.25}, fallback=0.5)
    assert pickle.loads(pickle.dumps(weights)) == weights
