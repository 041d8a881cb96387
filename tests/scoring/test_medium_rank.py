"""The best medium among several: highest weight, then a fixed tier order (ingestion uses it
to pick the medium a block's value shows when a pod holds it in several tiers)."""

from scoring.weights import MEDIA, TierWeights


def test_the_media_table_lists_every_medium_of_spec_section_3() -> None:
    names = {medium.name for medium in MEDIA}
    assert {"GPU", "CPU", "CPU_PINNED", "DISK", "EXTERNAL", "FS", "OBJ", "STORAGE"} <= names
    assert {"CPU_TIER1", "CPU_TIER2", "SHARED_STORAGE"} <= names


def test_the_highest_weight_wins() -> None:
    weights = TierWeights.from_config({"disk": 0.9, "cpu": 0.1})
    assert weights.best_medium(["CPU", "DISK"]) == "DISK"


def test_ties_follow_gpu_cpu_pinned_cpu_disk() -> None:
    weights = TierWeights.from_config({"gpu": 0.5, "cpu_pinned": 0.5, "cpu": 0.5, "disk": 0.5})
    order = sorted(["DISK", "CPU", "GPU", "CPU_PINNED"], key=weights.medium_rank)
    assert order == ["GPU", "CPU_PINNED", "CPU", "DISK"]


def test_other_media_tie_alphabetically_after_disk_and_no_medium_comes_last() -> None:
    weights = TierWeights.from_config({"disk": 1.0, "cpu": 1.0})
    order = sorted([None, "STORAGE", "EXTERNAL", "DISK", "FS", "CPU"], key=weights.medium_rank)
    assert order == ["CPU", "DISK", "EXTERNAL", "FS", "STORAGE", None]


def test_the_tier_order_ignores_case_and_spaces() -> None:
    weights = TierWeights.from_config({"gpu": 0.8})
    assert weights.best_medium(["cpu", " gpu "]) == " gpu "
