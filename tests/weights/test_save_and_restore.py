"""A valid edit is saved as one new version by its author, shown at once with its history
entry; a restore is reviewed, confirmed with a reason, checked against the version the
operator saw, and one new version."""

import pytest

from kvadmin.weights.active import active_weights
from kvadmin.weights.models import TierWeightsVersion
from tests.weights.forms import HTMX, weights_form

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def editing(editing, version_one):
    """Erin's client, with version 1 in the database as migration 0002 seeds it."""
    return editing


def test_an_edit_saves_one_version_and_shows_it(migrated_before, editing) -> None:
    data = weights_form(
        ("gpu", "1"), ("cpu", "0.5"), ("cpu_pinned", "0.8"), ("disk", "0.3"), reason="slow PCIe"
    )
    response = editing.post("/weights/save/", data, **HTMX)
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<div id="weights">'), "htmx gets the workspace only"
    assert "Saved version 2." in html
    saved = TierWeightsVersion.objects.get(version=2)
    assert (saved.author, saved.reason) == ("erin", "slow PCIe")
    assert saved.config["weights"] == {"cpu": 0.5, "cpu_pinned": 0.8, "disk": 0.3, "gpu": 1.0}
    assert "cpu 0.8 → 0.5" in html and "added disk = 0.3" in html
    assert 'id="active-version">2<' in html


def test_the_saved_version_is_what_this_process_scores_with(editing) -> None:
    editing.post("/weights/save/", weights_form(("gpu", "0.5")), **HTMX)
    active = active_weights()
    assert active.version == 2
    assert active.weights.weight_for("GPU") == 0.5
    assert active.weights.weight_for("CPU") == 0.8, "unconfigured defaults still apply"


def test_removing_a_row_and_changing_the_fallback(editing) -> None:
    data = weights_form(("gpu", "1"), ("cpu", "0.8"), fallback="0.6", **{"remove-k1": "1"})
    editing.post("/weights/save/", data, **HTMX)
    saved = TierWeightsVersion.objects.get(version=2)
    assert saved.config["weights"] == {"gpu": 1.0}
    assert saved.config["fallback"] == 0.6


def test_a_restore_is_reviewed_then_confirmed_with_a_reason(editing) -> None:
    editing.post("/weights/save/", weights_form(("gpu", "0.5")), **HTMX)
    review = editing.get("/weights/restore/1/review/", **HTMX).content.decode()
    assert "Review: restore version 1 as version 3" in review
    assert "gpu 0.5 → 1" in review and "added cpu = 0.8" in review
    assert 'name="base_version" value="2"' in review
    assert TierWeightsVersion.objects.count() == 2, "reviewing saves nothing"

    refused = editing.post("/weights/restore/1/", {"base_version": "2", "reason": " "}, **HTMX)
    assert "give a reason" in refused.content.decode()
    assert TierWeightsVersion.objects.count() == 2

    response = editing.post(
        "/weights/restore/1/", {"base_version": "2", "reason": "GPU is fine"}, **HTMX
    )
    assert "Restored version 1 as version 3." in response.content.decode()
    restored = TierWeightsVersion.objects.get(version=3)
    assert (restored.restored_from, restored.reason) == (1, "restored version 1: GPU is fine")
    assert active_weights().weights.weight_for("GPU") == 1.0


def test_a_restore_over_a_change_saved_since_is_409(editing) -> None:
    """Erin reviewed the restore at version 2; someone saved version 3 before she confirmed."""
    editing.post("/weights/save/", weights_form(("gpu", "0.5")), **HTMX)
    editing.post("/weights/save/", weights_form(("gpu", "0.7")), **HTMX)
    response = editing.post("/weights/restore/1/", {"base_version": "2", "reason": "undo"}, **HTMX)
    html = response.content.decode()
    assert response.status_code == 409
    assert "version 3 was saved by erin after you loaded version 2" in html
    assert "gpu 0.5 → 0.7" in html, "what was saved since"
    assert TierWeightsVersion.objects.count() == 3


def test_a_restore_without_base_version_is_refused(editing) -> None:
    editing.post("/weights/save/", weights_form(("gpu", "0.5")), **HTMX)
    response = editing.post("/weights/restore/1/", {"reason": "undo"}, **HTMX)
    assert response.status_code == 400
    assert TierWeightsVersion.objects.count() == 2


def test_restoring_a_missing_version_is_404(editing) -> None:
    assert editing.get("/weights/restore/99/review/", **HTMX).status_code == 404
    response = editing.post("/weights/restore/99/", {"base_version": "1", "reason": "x"}, **HTMX)
    assert response.status_code == 404
    assert TierWeightsVersion.objects.count() == 1


def test_without_htmx_a_save_redirects_to_the_page(editing) -> None:
    response = editing.post("/weights/save/", weights_form(("gpu", "0.5")), follow=True)
    assert response.redirect_chain == [("/weights/", 302)]
    assert '<p class="notice" role="status">Saved version 2.</p>' in response.content.decode()


def test_without_htmx_an_invalid_edit_renders_the_whole_page(editing) -> None:
    response = editing.post("/weights/save/", weights_form(("gpu", "1.5")))
    html = response.content.decode()
    assert response.status_code == 200
    assert "<h1>Tier weights</h1>" in html and "must be between 0 and 1, got 1.5" in html
