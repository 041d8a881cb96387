"""The weights page, its export and the dashboard say which kthena the index serves
(compatibility.md 2.7), how far a switch of value format went, and warn while the format and the
configured router version disagree."""

import json

import pytest
import redis
from django.test import override_settings

from kvadmin.index import value_format
from scoring.values import ValueFormat
from scoring.weights import TierWeights
from tests.index import write_kthena_index

pytestmark = pytest.mark.django_db

LEGACY_FOR_MAIN = override_settings(
    KVADMIN={"INDEX_VALUE_FORMAT": "legacy", "ROUTER_VERSION": "main"}
)
TIERED_FOR_MAIN = override_settings(KVADMIN={"ROUTER_VERSION": "main"})


def test_by_default_the_index_serves_kthena_with_tier_weights(viewing) -> None:
    page = viewing.get("/weights/").content.decode()
    assert 'data-format="tiered"' in page and "kthena with PR #1293" in page
    assert 'id="index-disagreement"' not in page and 'id="index-switching"' not in page
    assert (
        "it serves kthena with PR #1293 (tier weights)."
        in viewing.get("/weights/export/kthena.yaml").content.decode()
    )
    exported = json.loads(viewing.get("/weights/export/weights.json").content)
    assert exported["index"] == {
        "format": "tiered",
        "servesKthena": "kthena with PR #1293 (tier weights)",
        "routerVersion": "pr1293",
        "switching": False,
        "agrees": True,
    }
    assert 'id="index-serving"' not in viewing.get("/").content.decode()


@LEGACY_FOR_MAIN
def test_a_legacy_index_serves_kthena_main_and_shows_its_switch(
    viewing, redis_client: redis.Redis
) -> None:
    write_kthena_index(redis_client, {block: {"p.ns": "5|GPU"} for block in range(30)})
    value_format.rewrite_step(redis_client, ValueFormat.LEGACY, TierWeights(), 5)

    page = viewing.get("/weights/").content.decode()
    assert 'data-format="legacy"' in page and "kthena main (no tier weights)" in page
    assert 'id="index-switching"' in page and "Rewriting the index's values to legacy" in page
    assert 'id="index-switching"' in viewing.get("/").content.decode()  # the dashboard too
    yaml_text = viewing.get("/weights/export/kthena.yaml").content.decode()
    assert "it serves kthena main (no tier weights), which ignores tierWeights." in yaml_text
    assert json.loads(viewing.get("/weights/export/weights.json").content)["index"]["switching"]

    value_format.rewrite(redis_client, ValueFormat.LEGACY, TierWeights())
    assert 'id="index-switching"' not in viewing.get("/weights/").content.decode()
    assert 'id="index-serving"' not in viewing.get("/").content.decode()


@TIERED_FOR_MAIN
def test_the_dashboard_warns_when_the_router_misreads_the_format(viewing) -> None:
    dashboard = viewing.get("/").content.decode()
    assert 'id="index-disagreement"' in dashboard
    assert "KVADMIN_ROUTER_VERSION=main" in dashboard
    assert "restart filter and garbage collection cannot parse them" in dashboard
    assert 'id="index-disagreement"' in viewing.get("/weights/").content.decode()
    assert (
        "# WARNING: the index writes tiered values"
        in viewing.get("/weights/export/kthena.yaml").content.decode()
    )
    assert (
        json.loads(viewing.get("/weights/export/weights.json").content)["index"]["agrees"] is False
    )
