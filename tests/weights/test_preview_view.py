""" "Preview" replays recorded decisions under the draft in the form and saves nothing."""

import pytest

from kvadmin.weights.active import active_weights
from kvadmin.weights.models import TierWeightsVersion
from scoring.keys import DECISIONS_KEY
from tests.weights.forms import HTMX, ttft_fields, weights_form
from tests.weights.recorded import record

pytestmark = pytest.mark.django_db

DRAFT_ROWS = (("gpu", "1"), ("cpu", "0.5"), ("cpu_pinned", "0.8"), ("disk", "0.2"))


@pytest.fixture
def editing(editing, redis_client):
    """Erin's client, with decisions recorded for the what-if to replay."""
    record(redis_client)
    return editing


def test_it_shows_what_the_draft_would_change(editing, redis_client) -> None:
    before = redis_client.xlen(DECISIONS_KEY)
    response = editing.post("/weights/preview/", weights_form(*DRAFT_ROWS), **HTMX)
    html = response.content.decode()
    assert response.status_code == 200
    assert '<strong id="whatif-changed">2</strong> of 3 would choose a different pod' in html
    assert "<td>p3</td><td>0</td><td>1</td><td>+1</td>" in html
    assert "<td>p1</td><td>2</td><td>1</td><td>-1</td>" in html
    assert "weights version\n4" in html
    assert "<td>kthena defaults (1.0 fallback)</td><td>0 of 3 (0.0%)</td>" in html
    assert "<td>kvadmin defaults</td><td>1 of 3 (33.3%)</td>" in html
    assert TierWeightsVersion.objects.count() == 1
    assert redis_client.xlen(DECISIONS_KEY) == before
    assert active_weights().version == 1


def test_it_replays_as_many_decisions_as_asked(editing) -> None:
    data = weights_form(*DRAFT_ROWS, decisions="1")
    html = editing.post("/weights/preview/", data, **HTMX).content.decode()
    assert '<strong id="whatif-changed">1</strong> of 1 would' in html


def test_an_invalid_draft_shows_its_errors_in_the_editor_instead(editing) -> None:
    response = editing.post("/weights/preview/", weights_form(("gpu", "1.5")), **HTMX)
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<div id="editor">'), "the editor, with its errors"
    assert "must be between 0 and 1, got 1.5" in html
    assert 'id="whatif-changed"' not in html
    assert TierWeightsVersion.objects.count() == 1


def test_a_successful_preview_clears_the_errors_of_an_earlier_attempt(editing) -> None:
    """The editor is re-rendered from the posted draft: errors shown before are gone."""
    editing.post("/weights/preview/", weights_form(("gpu", "1.5")), **HTMX)
    response = editing.post("/weights/preview/", weights_form(("gpu", "0.9")), **HTMX)
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="editor">')
    assert "must be between" not in html and 'role="alert"' not in html
    assert 'name="weight-k0" value="0.9"' in html, "the draft stays as the operator left it"
    assert 'id="whatif-changed"' in html


def test_a_preview_replays_under_the_drafts_ttft_parameters_too(editing) -> None:
    """The recorded decisions were made by the kthena policy: parameters do not change them,
    and the form's parameters are read and validated (a bad one is pinned to its field)."""
    data = weights_form(*DRAFT_ROWS, **ttft_fields(kappa="-1"))
    html = editing.post("/weights/preview/", data, **HTMX).content.decode()
    assert 'id="ttft-errors-kappa"' in html and "must be at least 0" in html
    data = weights_form(*DRAFT_ROWS, **ttft_fields(kappa="3"))
    html = editing.post("/weights/preview/", data, **HTMX).content.decode()
    assert '<strong id="whatif-changed">2</strong> of 3' in html
    assert 'name="ttft-kappa" value="3"' in html
