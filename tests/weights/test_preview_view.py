""" "Preview" replays recorded decisions under the draft in the form and saves nothing."""

import pytest

from kvadmin.routing.decisions import DECISIONS_KEY
from kvadmin.weights.active import active_weights
from kvadmin.weights.models import TierWeightsVersion
from tests.weights.forms import HTMX, weights_form
from tests.weights.recorded import record

pytestmark = pytest.mark.django_db

DRAFT_ROWS = (("gpu", "1"), ("cpu", "0.5"), ("cpu_pinned", "0.8"), ("disk", "0.2"))


@pytest.fixture
def editing(client, editor, fresh_weights):
    client.force_login(editor)
    record(fresh_weights)
    return client


def test_it_shows_what_the_draft_would_change(editing, fresh_weights) -> None:
    before = fresh_weights.xlen(DECISIONS_KEY)
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
    assert fresh_weights.xlen(DECISIONS_KEY) == before
    assert active_weights().version == 1


def test_it_replays_as_many_decisions_as_asked(editing) -> None:
    data = weights_form(*DRAFT_ROWS, decisions="1")
    html = editing.post("/weights/preview/", data, **HTMX).content.decode()
    assert '<strong id="whatif-changed">1</strong> of 1 would' in html


def test_an_invalid_draft_shows_its_errors_in_the_editor_instead(editing) -> None:
    response = editing.post("/weights/preview/", weights_form(("gpu", "1.5")), **HTMX)
    assert response.status_code == 200
    assert response["HX-Retarget"] == "#weights"
    assert response["HX-Reswap"] == "outerHTML"
    assert "must be between 0 and 1, got 1.5" in response.content.decode()
    assert TierWeightsVersion.objects.count() == 1
