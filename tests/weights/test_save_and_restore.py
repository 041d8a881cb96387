"""A valid edit is saved as one new version by its author, shown at once with its history
entry; a restore is one click and one new version."""

import pytest

from kvadmin.weights.active import active_weights
from kvadmin.weights.models import TierWeightsVersion
from tests.weights.forms import HTMX, weights_form

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def editing(client, editor, fresh_weights, version_one):
    client.force_login(editor)
    return client


def test_an_edit_saves_one_version_and_shows_it(editing) -> None:
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


def test_restore_is_one_click_and_one_new_version(editing) -> None:
    editing.post("/weights/save/", weights_form(("gpu", "0.5")), **HTMX)
    response = editing.post("/weights/restore/1/", **HTMX)
    assert "Restored version 1 as version 3." in response.content.decode()
    assert TierWeightsVersion.objects.get(version=3).restored_from == 1
    assert active_weights().weights.weight_for("GPU") == 1.0


def test_restoring_a_missing_version_is_404(editing) -> None:
    assert editing.post("/weights/restore/99/", **HTMX).status_code == 404
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
