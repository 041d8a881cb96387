"""Under the legacy value format (compatibility.md 2.7) the matrix values name no medium, and the
residency pages still show each owner's tier, from kvadmin's own residency."""

import pytest
from django.test import override_settings

from kvadmin.index import value_format
from scoring.keys import block_key
from scoring.values import ValueFormat
from scoring.weights import TierWeights
from tests.index import MODEL, NOW, std

pytestmark = pytest.mark.django_db


@override_settings(KVADMIN={"INDEX_VALUE_FORMAT": "legacy", "ROUTER_VERSION": "main"})
def test_the_blocks_page_shows_the_tiers_of_a_legacy_index(browsing, index, redis_client) -> None:
    index.store("vllm-0.default", [1, 2], at=NOW)
    index.offload("vllm-0.default", [1], "CPU", at=NOW + 20)
    index.remove("vllm-0.default", [1], "GPU", at=NOW + 30)  # left in CPU only
    value_format.rewrite(redis_client, ValueFormat.LEGACY, TierWeights())
    assert redis_client.hget(block_key(MODEL, std(1)), "vllm-0.default") == str(NOW + 20)

    response = browsing.get("/blocks/")

    row = response.text.split(f"<code>{std(1)}</code>")[1].split("</tr>")[0]
    assert 'class="badge m-cpu" href="/pods/vllm-0.default/"' in row
    row = response.text.split(f"<code>{std(2)}</code>")[1].split("</tr>")[0]
    assert 'class="badge m-gpu" href="/pods/vllm-0.default/"' in row
