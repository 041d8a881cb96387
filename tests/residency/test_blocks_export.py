"""/blocks/ counts what its filters match, says when `?medium=` names a medium nobody holds,
and exports the current view (same filters) as CSV."""

import csv
import io

import pytest

from tests.index import MODEL, NOW, std
from tests.residency.conftest import register

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_pods_holding_blocks(index):
    """vllm-0 holds blocks 0-2 in GPU, block 0 in CPU too; vllm-1 holds block 1; both registered."""
    register("vllm-0.default")
    register("vllm-1.default")
    index.store("vllm-0.default", range(3), at=NOW)
    index.offload("vllm-0.default", [0], "CPU", at=NOW + 1)
    index.store("vllm-1.default", [1], at=NOW + 2)
    return index


def _csv(response) -> list[dict[str, str]]:
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="blocks.csv"'
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def test_the_page_counts_the_block_copies_its_filters_match(
    browsing, two_pods_holding_blocks
) -> None:
    assert 'data-matched="5"' in browsing.get("/blocks/", {"model": MODEL}).text
    assert 'data-matched="1"' in browsing.get("/blocks/", {"model": MODEL, "medium": "CPU"}).text


def test_a_medium_nobody_holds_says_so(browsing, two_pods_holding_blocks) -> None:
    response = browsing.get("/blocks/", {"model": MODEL, "medium": "XYZ"})

    assert response.status_code == 200
    assert 'id="unknown-medium"' in response.text
    assert f"No pod of {MODEL} holds blocks in medium <code>XYZ</code>" in response.text
    assert 'id="unknown-medium"' not in browsing.get("/blocks/", {"medium": "cpu"}).text


def test_the_export_is_the_current_view(browsing, two_pods_holding_blocks) -> None:
    everything = _csv(browsing.get("/blocks/export.csv", {"model": MODEL}))
    assert [row["block"] for row in everything] == [str(std(n)) for n in (1, 0, 2)]
    assert everything[0]["owners (pod:medium)"] == "vllm-0.default:GPU vllm-1.default:GPU"
    assert everything[0]["last stored (UTC)"].startswith("2025-10-09T")

    on_cpu = _csv(browsing.get("/blocks/export.csv", {"model": MODEL, "medium": "CPU"}))
    assert [row["block"] for row in on_cpu] == [str(std(0))]
    one_pod = _csv(browsing.get("/blocks/export.csv", {"model": MODEL, "pod": "vllm-1.default"}))
    assert [row["block"] for row in one_pod] == [str(std(1))]


def test_the_page_links_its_export_with_its_filters(browsing, two_pods_holding_blocks) -> None:
    html = browsing.get("/blocks/", {"model": MODEL, "medium": "CPU"}).text
    # MODEL as the link escapes it: the test is about the link's exact text
    assert 'href="/blocks/export.csv?model=Qwen%2FQwen3-8B&amp;medium=CPU" download' in html
