"""The current version exports as the kthena router's ConfigMap fragment (compatibility.md 2.5) and
as JSON, from the page and the command line."""

import json

import pytest
import yaml
from django.core.management import call_command

from kvadmin.weights.config import WeightConfig
from kvadmin.weights.versions import current_version, save_version

pytestmark = pytest.mark.django_db


def kvcache_args(text: str) -> dict:
    plugins = yaml.safe_load(text)["scheduler"]["pluginConfig"]
    (plugin,) = [plugin for plugin in plugins if plugin["name"] == "kvcache-aware"]
    return plugin["args"]


def test_the_yaml_is_the_kvcache_aware_plugin_args(viewing) -> None:
    save_version(
        WeightConfig.validated({"GPU": 1.0, "Disk": 0.25}),
        author="erin",
        reason="a test change",
        base_version=current_version().version,
    )
    response = viewing.get("/weights/export/kthena.yaml")
    assert response["Content-Type"] == "application/yaml"
    assert kvcache_args(response.content.decode()) == {
        "blockSizeToHash": 16,
        "maxBlocksToMatch": 128,
        "tierWeights": {"cpu": 0.8, "cpu_pinned": 0.8, "disk": 0.25, "gpu": 1.0},
    }
    assert "tier weights version 2" in response.content.decode()


def test_a_fallback_kthena_cannot_express_is_flagged(viewing) -> None:
    save_version(
        WeightConfig.validated({}, fallback=0.5),
        author="erin",
        reason="a test change",
        base_version=current_version().version,
    )
    text = viewing.get("/weights/export/kthena.yaml").content.decode()
    assert "# WARNING: kvadmin's fallback is 0.5" in text
    assert viewing.get("/weights/export/weights.json").json()["kthenaCompatible"] is False


def test_the_json_has_the_configured_and_the_effective_weights(viewing) -> None:
    save_version(
        WeightConfig.validated({"disk": 0.25}, notes={"disk": "NVMe"}),
        author="erin",
        reason="x",
        base_version=current_version().version,
    )
    data = viewing.get("/weights/export/weights.json").json()
    assert data["version"] == 2 and data["author"] == "erin"
    assert data["configured"] == {"disk": 0.25}
    assert data["notes"] == {"disk": "NVMe"}
    assert data["tierWeights"] == {"cpu": 0.8, "cpu_pinned": 0.8, "disk": 0.25, "gpu": 1.0}
    assert data["kthena"]["args"]["tierWeights"] == data["tierWeights"]


def test_download_links_name_the_file_by_version(viewing) -> None:
    response = viewing.get("/weights/export/kthena.yaml?download=1")
    assert response["Content-Disposition"] == 'attachment; filename="kthena-tier-weights-v1.yaml"'
    response = viewing.get("/weights/export/weights.json?download=1")
    assert response["Content-Disposition"] == 'attachment; filename="tier-weights-v1.json"'


def test_the_page_shows_the_fragment_to_copy(viewing) -> None:
    html = viewing.get("/weights/").content.decode()
    fragment = html.split('<pre class="export" id="kthena-yaml">', 1)[1].split("</pre>", 1)[0]
    assert kvcache_args(fragment)["tierWeights"]["gpu"] == 1.0


def test_the_command_prints_the_same_exports(viewing, capsys) -> None:
    call_command("tier_weights", "show", "--yaml")
    assert kvcache_args(capsys.readouterr().out) == kvcache_args(
        viewing.get("/weights/export/kthena.yaml").content.decode()
    )
    call_command("tier_weights", "show", "--json")
    assert json.loads(capsys.readouterr().out)["tierWeights"]["cpu"] == 0.8
