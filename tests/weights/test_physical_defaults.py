"""New installs start from kvadmin's physical defaults (issue 33 item 3): storage tiers weigh
less than host memory, the index names host memory before disk, kthena's export carries the
same weights; an install migrated before keeps its version and is offered them as a draft."""

import importlib

import pytest
import yaml
from django.apps import apps

from kvadmin.weights.active import active_media_preference, active_weights
from kvadmin.weights.config import KTHENA_DEFAULTS, KVADMIN_DEFAULTS
from kvadmin.weights.models import TierWeightsVersion
from kvadmin.weights.versions import current_version
from scoring.weights import KVADMIN_WEIGHTS, TierWeights

pytestmark = pytest.mark.django_db

SEED = importlib.import_module("kvadmin.weights.migrations.0002_seed_spec_defaults")


def test_the_frozen_seed_is_kvadmins_physical_defaults() -> None:
    assert SEED.PHYSICAL_DEFAULTS["weights"] == dict(KVADMIN_WEIGHTS)
    assert current_version().weight_config == KVADMIN_DEFAULTS


def test_a_new_install_indexes_and_prices_disk_after_host_memory(fresh_weights) -> None:
    weights = active_weights().weights
    assert weights.weight_for("DISK") == 0.4 < weights.weight_for("CPU_PINNED")
    order = active_media_preference().best_first
    assert order.index("cpu_pinned") < order.index("disk")
    assert TierWeights().weight_for("DISK") == 1.0, "kthena's own defaults are unchanged"


def test_the_kthena_export_carries_the_same_weights(viewing) -> None:
    fragment = yaml.safe_load(viewing.get("/weights/export/kthena.yaml").content)
    (plugin,) = fragment["scheduler"]["pluginConfig"]
    exported = TierWeights.from_config(plugin["args"]["tierWeights"])
    assert exported == KVADMIN_DEFAULTS.tier_weights()


def test_seeding_again_never_changes_an_existing_version() -> None:
    TierWeightsVersion.objects.filter(version=1).update(config=KTHENA_DEFAULTS.to_json())
    SEED.seed(apps, None)
    assert TierWeightsVersion.objects.get(version=1).weight_config == KTHENA_DEFAULTS
    assert TierWeightsVersion.objects.count() == 1


def test_an_install_migrated_before_is_offered_them_as_a_draft(migrated_before, editing) -> None:
    html = editing.get("/weights/").content.decode()
    assert 'id="physical-offer"' in html
    draft = editing.get("/weights/?start=kvadmin").content.decode()
    assert 'name="weight-' in draft and 'value="disk"' in draft
    assert current_version().weight_config == KTHENA_DEFAULTS, "nothing saved"


def test_a_new_install_is_not_offered_what_it_has(editing) -> None:
    assert 'id="physical-offer"' not in editing.get("/weights/").content.decode()
