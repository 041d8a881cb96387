"""The page lists the configured media and every medium the index holds blocks in, saying
where each weight comes from; editors get the form, with the version scoring uses."""

import pytest

from kvadmin.weights.config import WeightConfig
from kvadmin.weights.versions import current_version, save_version

pytestmark = pytest.mark.django_db


def main(response) -> str:
    assert response.status_code == 200
    return response.content.decode().split("<main", 1)[1]


def test_it_marks_media_seen_but_not_configured_as_weighing_the_fallback(editing, index) -> None:
    for n, medium in enumerate(["GPU", "NVME", "CPU_PINNED"]):
        index.store("sglang-0.default", [n], medium, kind="sglang")
    for n, medium in enumerate(["NVME", None]):
        index.store("sglang-1.default", [n], medium, kind="sglang")
    html = main(editing.get("/weights/"))
    disk = html.split("<td>nvme</td>", 1)[1].split("</tr>", 1)[0]
    assert "weighs the fallback; seen as NVME" in disk
    assert "2 pods" in disk
    no_medium = html.split("<td>(no medium)</td>", 1)[1].split("</tr>", 1)[0]
    assert "weighs the fallback" in no_medium and "Configure" not in no_medium
    gpu = html.split('value="gpu"', 1)[1].split("</tr>", 1)[0]
    assert "1 pod" in gpu


def test_a_configure_button_prefills_a_row_for_a_seen_medium(editing, index) -> None:
    index.store("sglang-0.default", [0], "NVME", kind="sglang")
    html = main(editing.get("/weights/"))
    assert 'hx-get="/weights/row/?name=nvme&weight=1"' in html
    row = editing.get("/weights/row/?name=nvme&weight=1", HTTP_HX_REQUEST="true")
    assert 'value="nvme"' in row.content.decode()


def test_an_unconfigured_default_is_shown_as_kthenas(editing) -> None:
    save_version(
        WeightConfig.validated({"gpu": 1.0}),
        author="erin",
        reason="a test change",
        base_version=current_version().version,
    )
    html = main(editing.get("/weights/"))
    cpu = html.split("<td>cpu</td>", 1)[1].split("</tr>", 1)[0]
    assert "<td>0.8</td>" in cpu and "kthena default" in cpu


def test_editors_get_the_form_with_the_current_version(editing) -> None:
    html = main(editing.get("/weights/"))
    assert 'name="base_version" value="1"' in html
    for medium, weight in (("gpu", "1"), ("cpu", "0.8"), ("cpu_pinned", "0.8")):
        assert f'value="{medium}"' in html
        assert f'value="{weight}"' in html
    assert 'id="active-version">1<' in html


def test_the_history_lists_every_version_with_its_diff(editing) -> None:
    save_version(
        WeightConfig.validated({"gpu": 0.9}),
        author="erin",
        reason="try it",
        base_version=current_version().version,
    )
    html = main(editing.get("/weights/"))
    history = html.split('id="history-title"', 1)[1]
    assert "Version 2" in history and "erin" in history and "“try it”" in history
    assert "gpu 1 → 0.9" in history
    assert "Restore version 1" in history and "Restore version 2" not in history


def test_the_page_still_shows_the_weights_when_the_index_is_down(editing, redis_down) -> None:
    html = main(editing.get("/weights/"))
    assert "The index is unavailable: media seen in it are not shown." in html
    assert 'value="cpu_pinned"' in html


def test_the_draft_can_start_from_kvadmins_defaults(editing) -> None:
    """Every medium of the media table, in physical order; the current version stays 1."""
    html = main(editing.get("/weights/?start=kvadmin"))
    assert 'name="base_version" value="1"' in html
    for medium, weight in (("gpu", "1"), ("cpu", "0.8"), ("disk", "0.4"), ("obj", "0.2")):
        row = html.split(f'value="{medium}"', 1)[1].split("</tr>", 1)[0]
        assert f'value="{weight}"' in row
    assert 'value="storage"' in html and 'value="cpu_tier2"' in html
    assert current_version().version == 1


def test_the_draft_can_start_from_kthenas_defaults(editing) -> None:
    html = main(editing.get("/weights/?start=kthena"))
    assert 'value="gpu"' in html and 'value="disk"' not in html
