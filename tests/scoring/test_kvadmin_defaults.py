"""kvadmin's own default weights weigh every medium of the media table by where it sits; kthena's
defaults (the 1.0 fallback for unconfigured media) stay what `TierWeights()` means."""

from kvadmin.weights.config import KTHENA_DEFAULTS, KVADMIN_DEFAULTS
from scoring.weights import DEFAULT_FALLBACK, KVADMIN_WEIGHTS, MEDIA, MediaPreference, TierWeights

PHYSICAL_ORDER = [
    {"gpu"},
    {"cpu_pinned", "cpu", "cpu_tier1"},
    {"disk", "fs", "storage", "cpu_tier2"},
    {"obj", "external", "shared_storage"},
]


def test_every_medium_of_the_table_is_configured() -> None:
    assert set(KVADMIN_WEIGHTS) == {m.name.lower() for m in MEDIA}
    assert dict(KVADMIN_DEFAULTS.weights) == dict(KVADMIN_WEIGHTS)


def test_media_weigh_in_physical_order() -> None:
    levels = [{KVADMIN_WEIGHTS[m] for m in level} for level in PHYSICAL_ORDER]
    assert all(len(weights) == 1 for weights in levels), levels
    assert [w.pop() for w in levels] == [1.0, 0.8, 0.4, 0.2]


def test_the_fallback_stays_kthenas() -> None:
    weights = KVADMIN_DEFAULTS.tier_weights()
    assert weights.fallback == DEFAULT_FALLBACK and weights.kthena_compatible
    assert weights.weight_for("SOMETHING_NEW") == 1.0


def test_kthenas_defaults_are_unchanged() -> None:
    assert KTHENA_DEFAULTS.tier_weights() == TierWeights()
    assert TierWeights().weight_for("DISK") == 1.0


def test_the_media_preference_follows_the_same_weights() -> None:
    """The matrix value names the physically best medium; media no engine documents (at the
    1.0 fallback) and no medium rank right after GPU, as they score."""
    preference = MediaPreference.from_tier_weights(KVADMIN_DEFAULTS.tier_weights())
    assert preference.best_first[:4] == ("gpu", "cpu_pinned", "cpu", "cpu_tier1")
    assert preference.best_first[4] == "disk"
    assert set(preference.best_first[4:8]) == {"disk", "fs", "storage", "cpu_tier2"}
    assert set(preference.best_first[8:]) == {"obj", "external", "shared_storage"}
    assert preference.fallback_position == 1
