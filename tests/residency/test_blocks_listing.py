"""/blocks/: a model's cached blocks newest first, owners as pod badges coloured by the medium
kthena's router sees, filtered by pod and medium."""

import re

import pytest

from tests.index import MODEL, NOW, OTHER_MODEL, std
from tests.residency.conftest import register

pytestmark = pytest.mark.django_db


def _listed(response) -> list[str]:
    """Block hashes in page order."""
    return re.findall(
        r'<tr class="block-row">\s*<td><a href="[^"]+"><code>(\d+)</code>', response.text
    )


def test_blocks_are_listed_newest_first_with_their_owners(browsing, index) -> None:
    index.store("vllm-0.default", [1, 2], at=NOW)
    index.store("vllm-1.default", [2, 3], at=NOW + 10)
    index.offload("vllm-0.default", [1], "CPU", at=NOW + 20)

    response = browsing.get("/blocks/")

    assert response.status_code == 200
    # Blocks 2 and 3 were last stored in the same second: Redis orders those by their text.
    assert _listed(response) == [str(std(1)), *sorted([str(std(2)), str(std(3))], reverse=True)]
    # Block 2 is held by both pods: one row, two badges; block 1 is valued GPU (the best tier).
    row = response.text.split(f"<code>{std(2)}</code>")[1].split("</tr>")[0]
    assert 'class="badge m-gpu" href="/pods/vllm-0.default/"' in row
    assert 'class="badge m-gpu" href="/pods/vllm-1.default/"' in row
    assert f'href="/blocks/{MODEL}/{std(1)}/"' in response.text


def test_the_pod_filter_keeps_that_pods_blocks(browsing, index) -> None:
    index.store("vllm-0.default", [1, 2], at=NOW)
    index.store("vllm-1.default", [3], at=NOW + 10)

    response = browsing.get("/blocks/", {"model": MODEL, "pod": "vllm-0.default"})

    assert _listed(response) == sorted([str(std(1)), str(std(2))], reverse=True)


def test_the_medium_filter_keeps_blocks_held_in_that_medium(browsing, index) -> None:
    index.store("vllm-0.default", [1, 2, 3], at=NOW)
    index.offload("vllm-0.default", [2], "CPU", at=NOW + 5)
    index.store("sglang-0.default", [4], "CPU_PINNED", at=NOW + 1, kind="sglang")

    cpu = browsing.get("/blocks/", {"model": MODEL, "medium": "CPU"})
    pinned = browsing.get("/blocks/", {"model": MODEL, "medium": "cpu_pinned"})

    assert _listed(cpu) == [str(std(2))]
    assert _listed(pinned) == [str(std(4))]
    assert 'class="badge m-cpu_pinned"' in pinned.text


def test_filtered_by_medium_a_row_shows_the_medium_that_matched_and_the_routers(
    browsing, index
) -> None:
    """vllm-0 holds block 2 in GPU and in CPU; its router value says GPU (the best tier). With
    Medium CPU, its badge is the CPU it matched in, labelled, and the router's GPU beside it;
    vllm-1 (GPU only, not what the filter matched) shows the router's medium alone."""
    index.store("vllm-0.default", [2], at=NOW)
    index.store("vllm-1.default", [2], at=NOW)
    index.offload("vllm-0.default", [2], "CPU", at=NOW + 5)

    row = browsing.get("/blocks/", {"model": MODEL, "medium": "CPU"}).text.split("<code>")[1]
    row = row.split("</tr>")[0]

    matched = re.search(
        r'<a class="badge m-cpu" href="/pods/vllm-0.default/"[^>]*>vllm-0.default &middot; '
        r'held in CPU</a> <small class="router-medium"[^>]*>router: GPU</small>',
        row,
    )
    assert matched, row
    assert re.search(r'class="badge m-gpu" href="/pods/vllm-1.default/"[^>]*>vllm-1.default '
                     r"&middot; GPU</a></span>", row), row  # fmt: skip
    unfiltered = browsing.get("/blocks/", {"model": MODEL}).text
    assert "&middot; held in" not in unfiltered, "no filter: the router's medium"
    assert 'class="router-medium"' not in unfiltered


def test_blocks_stored_without_a_medium_have_their_own_filter(browsing, index) -> None:
    index.store("vllm-0.default", [1], None, at=NOW)
    index.store("vllm-0.default", [2], "GPU", at=NOW)

    response = browsing.get("/blocks/", {"model": MODEL, "medium": "(none)"})

    assert _listed(response) == [str(std(1))]
    assert "no medium" in response.text


def test_each_model_lists_only_its_own_blocks(browsing, index) -> None:
    index.store("vllm-0.default", [1], at=NOW)
    index.store("llama-0.default", [2], at=NOW, model=OTHER_MODEL)

    qwen = browsing.get("/blocks/", {"model": MODEL})
    llama = browsing.get("/blocks/", {"model": OTHER_MODEL})

    assert _listed(qwen) == [str(std(1))]
    assert _listed(llama) == [str(std(2))]
    assert f"<option selected>{OTHER_MODEL}</option>" in llama.text


def test_a_pod_that_does_not_serve_the_model_is_a_clear_error(browsing, index) -> None:
    index.store("vllm-0.default", [1], at=NOW)
    index.store("llama-0.default", [2], at=NOW, model=OTHER_MODEL)

    response = browsing.get("/blocks/", {"model": MODEL, "pod": "llama-0.default"})

    assert response.status_code == 400
    assert "does not serve" in response.text


def test_a_registered_pod_without_blocks_filters_to_an_empty_page(browsing, index) -> None:
    register("vllm-9.default")
    index.store("vllm-0.default", [1], at=NOW)

    response = browsing.get("/blocks/", {"model": MODEL, "pod": "vllm-9.default"})

    assert response.status_code == 200
    assert _listed(response) == []
    assert "No blocks match." in response.text


def test_an_unknown_model_is_not_found(browsing, index) -> None:
    index.store("vllm-0.default", [1], at=NOW)

    assert browsing.get("/blocks/", {"model": "no/such-model"}).status_code == 404


def test_an_empty_index_says_so(browsing, index) -> None:
    response = browsing.get("/blocks/")

    assert response.status_code == 200
    assert "No model has cached blocks yet" in response.text


def test_a_model_with_engines_but_no_blocks_lists_nothing(browsing, index) -> None:
    register("vllm-0.default")

    response = browsing.get("/blocks/")

    assert response.status_code == 200
    assert "No blocks match." in response.text


def test_it_needs_a_login(client, index) -> None:
    response = client.get("/blocks/")

    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")
