"""Media are named in text wherever a colour shows them, so nobody needs to tell the colours
apart: an owner's badge on /blocks/ and on a pod's page says the medium beside the pod."""

import pytest

from tests.index import NOW
from tests.residency.conftest import register

pytestmark = pytest.mark.django_db


@pytest.fixture
def held(index) -> None:
    """vllm-0 holds block 1 in GPU and block 2 in DISK."""
    register("vllm-0.default")
    index.store("vllm-0.default", [1], at=NOW)
    index.store("vllm-0.default", [2], medium="DISK", at=NOW)


def test_an_owner_badge_on_the_blocks_page_names_its_medium(browsing, held) -> None:
    page = browsing.get("/blocks/").content.decode()
    assert ">vllm-0.default &middot; GPU</a>" in page
    assert ">vllm-0.default &middot; DISK</a>" in page


def test_an_owner_badge_on_the_pod_page_names_its_medium(browsing, held) -> None:
    page = browsing.get("/pods/vllm-0.default/").content.decode()
    assert ">vllm-0.default &middot; GPU</span>" in page
    assert ">vllm-0.default &middot; DISK</span>" in page
