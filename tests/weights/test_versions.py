"""Each save appends exactly one version; a restore appends a copy; nothing is ever edited."""

import pytest

from kvadmin.weights.active import active_weights
from kvadmin.weights.config import KTHENA_DEFAULTS, KVADMIN_DEFAULTS, WeightConfig
from kvadmin.weights.models import TierWeightsVersion
from kvadmin.weights.versions import (
    NothingChanged,
    ReasonRequired,
    StaleDraft,
    current_version,
    history,
    restore_version,
    save_version,
)
from scoring.weights import KVADMIN_WEIGHTS

pytestmark = pytest.mark.django_db

LOWER_CPU = WeightConfig.validated({**KVADMIN_WEIGHTS, "cpu": 0.5})


def test_the_migration_seeds_version_one_with_kvadmins_physical_defaults() -> None:
    seeded = TierWeightsVersion.objects.get(version=1)
    assert seeded.weight_config == KVADMIN_DEFAULTS
    weights = seeded.weight_config.tier_weights()
    assert (
        weights.weight_for("DISK") < weights.weight_for("CPU_PINNED") == weights.weight_for("CPU")
    )
    assert weights.best_medium(["DISK", "CPU_PINNED"]) == "CPU_PINNED", "disk after host memory"
    assert current_version() == seeded


def test_a_save_appends_one_version_with_author_and_reason() -> None:
    saved = save_version(LOWER_CPU, author="erin", reason="CPU tier is slow", base_version=1)
    assert saved.version == 2
    assert (saved.author, saved.reason) == ("erin", "CPU tier is slow")
    assert TierWeightsVersion.objects.count() == 2
    assert current_version().weight_config == LOWER_CPU


def test_saving_the_same_weights_adds_nothing() -> None:
    with pytest.raises(NothingChanged):
        save_version(
            KVADMIN_DEFAULTS,
            author="erin",
            reason="a test change",
            base_version=current_version().version,
        )
    assert TierWeightsVersion.objects.count() == 1


def test_a_draft_made_from_an_older_version_is_refused() -> None:
    save_version(LOWER_CPU, author="erin", reason="a test change", base_version=1)
    with pytest.raises(StaleDraft, match="version 2 was saved by erin"):
        save_version(
            WeightConfig.validated({"disk": 0.1}),
            author="bob",
            reason="a test change",
            base_version=1,
        )
    assert TierWeightsVersion.objects.count() == 2


def test_restoring_appends_a_copy_of_the_old_version() -> None:
    save_version(
        LOWER_CPU, author="erin", reason="a test change", base_version=current_version().version
    )
    restored = restore_version(1, author="bob", base_version=2, reason="CPU is fine after all")
    assert restored.version == 3
    assert restored.restored_from == 1
    assert restored.reason == "restored version 1: CPU is fine after all"
    assert restored.weight_config == KVADMIN_DEFAULTS
    assert list(TierWeightsVersion.objects.values_list("version", flat=True)) == [3, 2, 1]


def test_restoring_the_current_weights_adds_nothing() -> None:
    with pytest.raises(NothingChanged):
        restore_version(1, author="bob", base_version=1, reason="again")


def test_a_restore_over_a_change_saved_since_is_refused() -> None:
    """Bob looked at version 2 and restores version 1; Carol saved version 3 meanwhile."""
    save_version(LOWER_CPU, author="erin", reason="slow CPU", base_version=1)
    save_version(WeightConfig.validated({"cpu": 0.6}), author="carol", reason="x", base_version=2)
    with pytest.raises(StaleDraft) as raised:
        restore_version(1, author="bob", base_version=2, reason="undo")
    assert [entry.version.version for entry in raised.value.saved_since] == [3]
    assert TierWeightsVersion.objects.count() == 3


@pytest.mark.parametrize("reason", ["", "   "])
def test_saves_and_restores_need_a_reason(reason) -> None:
    with pytest.raises(ReasonRequired):
        save_version(LOWER_CPU, author="erin", reason=reason, base_version=1)
    save_version(LOWER_CPU, author="erin", reason="slow CPU", base_version=1)
    with pytest.raises(ReasonRequired):
        restore_version(1, author="bob", base_version=2, reason=reason)
    assert TierWeightsVersion.objects.count() == 2


def test_the_history_shows_what_each_version_changed() -> None:
    save_version(LOWER_CPU, author="erin", reason="a test change", base_version=1)
    restore_version(1, author="bob", base_version=2, reason="back")
    entries = history()
    assert [entry.version.version for entry in entries] == [3, 2, 1]
    assert [str(change) for change in entries[0].changes] == ["cpu 0.5 → 0.8"]
    assert [str(change) for change in entries[1].changes] == ["cpu 0.8 → 0.5"]
    assert "added disk = 0.4" in [str(change) for change in entries[2].changes], "vs kthena's"


def test_a_save_is_published_when_the_transaction_commits(
    fresh_weights, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        saved = save_version(
            LOWER_CPU, author="erin", reason="a test change", base_version=current_version().version
        )
    active = active_weights()
    assert active.version == saved.version
    assert active.weights.weight_for("CPU") == 0.5


def test_with_no_saved_version_the_defaults_apply_as_version_zero() -> None:
    TierWeightsVersion.objects.all().delete()
    assert current_version().version == 0
    assert current_version().weight_config == KTHENA_DEFAULTS
    assert (
        save_version(LOWER_CPU, author="erin", reason="a test change", base_version=0).version == 1
    )


def test_a_version_redis_refuses_is_saved_and_reported(
    fresh_weights, redis_down, django_capture_on_commit_callbacks, caplog
) -> None:
    """Redis down at the moment of the save: the version exists, scoring keeps the old one
    and the log says how to repair."""
    with django_capture_on_commit_callbacks(execute=True):
        saved = save_version(
            LOWER_CPU, author="erin", reason="a test change", base_version=current_version().version
        )
    assert current_version() == saved
    assert "tier weights version 2 saved but not published" in caplog.text
