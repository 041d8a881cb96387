"""Media preference: which medium the matrix value names. Pure, no Redis."""

import pytest

from scoring.weights import DEFAULT_PREFERENCE, MediaPreference, TierWeights


def test_the_default_follows_kthenas_default_weights() -> None:
    """GPU (1.0), then DISK and unknown media at the 1.0 fallback, then the 0.8 host tiers."""
    assert DEFAULT_PREFERENCE.best_first == ("gpu", "disk", "cpu_pinned", "cpu")
    assert DEFAULT_PREFERENCE.fallback_position == 2


def test_it_orders_media_as_tier_weights_rank_them() -> None:
    weights = TierWeights({"gpu": 0.5, "cpu": 0.9, "fs": 0.7}, fallback=0.6)
    preference = MediaPreference.from_tier_weights(weights)
    media = ["gpu", "cpu", "fs", "cpu_pinned", "disk"]
    assert list(preference.best_first) == sorted(media, key=weights.medium_rank)
    # Unknown media weigh 0.6: below fs (0.7), above gpu (0.5).
    assert preference.best_first[preference.fallback_position :][0] == "gpu"


def test_a_low_fallback_ranks_unlisted_media_last() -> None:
    weights = TierWeights({"gpu": 1.0, "cpu": 0.8}, fallback=0.1)
    preference = MediaPreference.from_tier_weights(weights)
    assert preference.fallback_position == len(preference.best_first)


def test_names_are_compared_trimmed_and_lower_case() -> None:
    preference = MediaPreference(("GPU ", " Cpu"), fallback_position=2)

    assert preference.best_first == ("gpu", "cpu")


def test_it_rejects_a_medium_listed_twice() -> None:
    with pytest.raises(ValueError, match="twice"):
        MediaPreference(("gpu", "GPU"), fallback_position=0)


def test_it_rejects_a_fallback_position_outside_the_list() -> None:
    with pytest.raises(ValueError, match="fallback_position"):
        MediaPreference(("gpu",), fallback_position=2)
