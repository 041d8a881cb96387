"""Anyone logged in may look; only holders of the change permission may write. Victor, a
viewer, gets a read-only page and a 403 on every write."""

import re

import pytest

from kvadmin.weights.models import TierWeightsVersion
from kvadmin.weights.versions import current_version, save_version
from tests.weights.forms import DEFAULT_ROWS, HTMX, weights_form
from tests.weights.recorded import DRAFT_CONFIG

pytestmark = pytest.mark.django_db

WRITES = [
    ("post", "/weights/save/"),
    ("post", "/weights/restore/1/"),
    ("post", "/weights/preview/"),
    ("get", "/weights/row/"),
]


@pytest.mark.parametrize(("method", "url"), WRITES)
def test_a_viewer_gets_403_on_every_write(viewing, method: str, url: str) -> None:
    save_version(
        DRAFT_CONFIG, author="erin", reason="a test change", base_version=current_version().version
    )  # so that a restore of version 1 would change
    data = weights_form(("gpu", "0.5")) if method == "post" else {}
    response = getattr(viewing, method)(url, data, **HTMX)
    assert response.status_code == 403
    assert TierWeightsVersion.objects.count() == 2


def test_a_viewer_sees_the_weights_but_no_way_to_edit(viewing) -> None:
    save_version(
        DRAFT_CONFIG, author="erin", reason="a test change", base_version=current_version().version
    )
    main = viewing.get("/weights/").content.decode().split("<main", 1)[1]
    for control in ("<form", "<input", "hx-post", "hx-get"):
        assert control not in main, control
    assert re.findall(r"<button[^>]*>([^<]*)</button>", main) == ["Copy YAML"]
    assert "<td>disk</td><td>0.2</td>" in main
    assert "You can look but not change" in main


def test_anonymous_visitors_are_sent_to_log_in(client, fresh_weights) -> None:
    for url in ("/weights/", "/weights/export/kthena.yaml"):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/")
    assert client.post("/weights/save/", weights_form(*DEFAULT_ROWS)).status_code == 302


def test_an_editor_may_write(client, editor, fresh_weights) -> None:
    client.force_login(editor)
    response = client.post("/weights/save/", weights_form(("gpu", "0.5")), **HTMX)
    assert response.status_code == 200
    assert TierWeightsVersion.objects.count() == 2
