"""An invalid edit comes back (status 200, for htmx) with the error beside the field at fault,
and saves nothing."""

import pytest

from kvadmin.weights.models import TierWeightsVersion
from scoring.weights import KVADMIN_WEIGHTS
from tests.weights.forms import HTMX, weights_form

pytestmark = pytest.mark.django_db


def post(client, *rows: tuple[str, str], **options):
    response = client.post("/weights/save/", weights_form(*rows, **options), **HTMX)
    assert response.status_code == 200
    assert TierWeightsVersion.objects.count() == 1, "an invalid edit saved a version"
    return response.content.decode()


def field_error(html: str, key: str) -> str:
    """The error text shown with the row `key` (empty when none)."""
    marker = f'id="errors-{key}" role="alert">'
    if marker not in html:
        return ""
    return html.split(marker, 1)[1].split("</span>", 1)[0]


def test_a_weight_above_one_is_refused_beside_its_field(editing) -> None:
    html = post(editing, ("gpu", "1"), ("cpu", "1.5"))
    assert field_error(html, "k1") == "cpu: must be between 0 and 1, got 1.5"
    assert 'name="weight-k1" value="1.5"' in html, "the entered value is kept for correction"
    assert 'aria-describedby="errors-k1"' in html
    assert field_error(html, "k0") == ""


def test_a_negative_weight_is_refused(editing) -> None:
    html = post(editing, ("gpu", "1"), ("cpu", "-0.1"))
    assert field_error(html, "k1") == "cpu: must be between 0 and 1, got -0.1"


def test_nan_is_refused(editing) -> None:
    html = post(editing, ("gpu", "nan"))
    assert field_error(html, "k0") == "gpu: must be a number between 0 and 1, got NaN"


def test_an_empty_name_is_refused(editing) -> None:
    html = post(editing, ("gpu", "1"), ("", "0.5"))
    assert field_error(html, "k1") == "unnamed: the name is empty"


def test_a_duplicate_name_differing_in_case_is_refused_on_both_rows(editing) -> None:
    html = post(editing, ("gpu", "1"), ("disk", "0.5"), ("DISK", "0.4"))
    assert "the same medium as &#x27;DISK&#x27;" in field_error(html, "k1")
    assert "the same medium as &#x27;disk&#x27;" in field_error(html, "k2")


def test_a_bad_fallback_is_refused_beside_the_fallback(editing) -> None:
    html = post(editing, ("gpu", "1"), fallback="1.5")
    assert 'id="fallback-errors" role="alert">fallback: must be between 0 and 1' in html


def test_every_bad_field_is_reported_at_once(editing) -> None:
    html = post(editing, ("gpu", "1.5"), ("cpu", "-0.1"), ("", "0.5"), fallback="nan")
    assert all(field_error(html, key) for key in ("k0", "k1", "k2"))
    assert 'id="fallback-errors"' in html


def test_a_draft_from_an_older_version_is_refused_whole(editing, editor) -> None:
    data = weights_form(("gpu", "0.9"))
    TierWeightsVersion.objects.create(version=2, author="bob", config={"weights": {}})
    response = editing.post("/weights/save/", data, **HTMX)
    assert response.status_code == 409  # the editor still swaps in (page config)
    assert "version 2 was saved by bob after you loaded version 1" in response.content.decode()
    assert TierWeightsVersion.objects.count() == 2


def test_saving_unchanged_weights_adds_no_version(editing) -> None:
    html = post(editing, *((name, str(weight)) for name, weight in KVADMIN_WEIGHTS.items()))
    assert "version 1 already has these weights" in html
