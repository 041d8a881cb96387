"""A save names the version it was made from: a stale one answers 409 with what was saved
since (which weights, who, when, why) and saves nothing; one without it is refused."""

import pytest

from kvadmin.weights.config import WeightConfig
from kvadmin.weights.models import TierWeightsVersion
from kvadmin.weights.versions import StaleDraft, current_version, save_version
from tests.weights.forms import HTMX, weights_form

pytestmark = pytest.mark.django_db


def test_a_stale_save_is_409_with_what_changed_since(editing) -> None:
    form = weights_form(("gpu", "1"), ("cpu", "0.3"))  # made from version 1
    save_version(
        WeightConfig.validated({"cpu": 0.5}), author="bob", reason="CPU is slow", base_version=1
    )
    save_version(
        WeightConfig.validated({"cpu": 0.6}), author="carol", reason="a test change", base_version=2
    )

    response = editing.post("/weights/save/", form, **HTMX)

    assert response.status_code == 409
    html = response.content.decode()
    assert "version 3 was saved by carol after you loaded version 1" in html
    assert "bob · “CPU is slow”: cpu 0.8 → 0.5" in html
    assert "carol · “a test change”: cpu 0.5 → 0.6" in html
    assert 'name="weight-k1" value="0.3"' in html, "the operator's draft is kept"
    assert current_version().version == 3


def test_the_page_lets_htmx_swap_a_409(editing) -> None:
    html = editing.get("/weights/").content.decode()
    assert '"code": "409", "swap": true' in html


def test_a_save_without_base_version_is_refused(editing) -> None:
    form = weights_form(("gpu", "1"), ("cpu", "0.3"))
    del form["base_version"]

    response = editing.post("/weights/save/", form, **HTMX)

    assert response.status_code == 400
    assert "which version it edits" in response.content.decode()
    assert TierWeightsVersion.objects.count() == 1


def test_stale_draft_lists_every_version_saved_since_newest_first(fresh_weights) -> None:
    save_version(
        WeightConfig.validated({"cpu": 0.5}), author="bob", reason="a test change", base_version=1
    )
    save_version(
        WeightConfig.validated({"cpu": 0.6}), author="carol", reason="a test change", base_version=2
    )

    with pytest.raises(StaleDraft) as raised:
        save_version(
            WeightConfig.validated({"disk": 0.1}),
            author="erin",
            reason="a test change",
            base_version=1,
        )

    assert [entry.version.version for entry in raised.value.saved_since] == [3, 2]
    assert " · bob · “a test change”: cpu 0.8 → 0.5; " in raised.value.details[1]
