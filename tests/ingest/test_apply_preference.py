"""Media preference: which medium the matrix value names. Pure, no Redis."""

import pytest

from kvadmin.ingest.apply import MediaPreference


def test_kthena_default_weights_put_unlisted_media_beside_gpu() -> None:
    preference = MediaPreference.from_weights({"gpu": 1.0, "cpu": 0.8, "cpu_pinned": 0.8})

    assert preference.best_first == ("gpu", "cpu", "cpu_pinned")
    assert preference.fallback_position == 1


def test_names_are_compared_trimmed_and_lower_case() -> None:
    preference = MediaPreference(("GPU ", " Cpu"), fallback_position=2)

    assert preference.best_first == ("gpu", "cpu")
    assert preference.script_args() == ["2", "2", "gpu", "cpu"]


def test_a_low_fallback_ranks_unlisted_media_last() -> None:
    assert (
        MediaPreference.from_weights({"gpu": 1.0, "cpu": 0.8}, fallback=0.1).fallback_position == 2
    )


def test_it_rejects_a_medium_listed_twice() -> None:
    with pytest.raises(ValueError, match="twice"):
        MediaPreference(("gpu", "GPU"), fallback_position=0)


def test_it_rejects_a_fallback_position_outside_the_list() -> None:
    with pytest.raises(ValueError, match="fallback_position"):
        MediaPreference(("gpu",), fallback_position=2)
