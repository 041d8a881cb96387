"""The header search: one box for every kind of id an operator has in hand. One match jumps to
its page; several are listed; none says what the query was tried as."""

import pytest

from kvadmin.routing.service import score
from kvadmin.search.lookup import engine_hash_texts
from tests.index import MODEL, block_tokens, engine_hash, std
from tests.residency.conftest import alice, browsing, register  # noqa: F401  (shared fixtures)

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet(index):  # noqa: F811
    """vllm-0 and vllm-1 serve MODEL and hold blocks 0-3 (vllm-1 only 0-1)."""
    register("vllm-0.default")
    register("vllm-1.default")
    index.store("vllm-0.default", range(4))
    index.store("vllm-1.default", range(2))
    return index


def _search(browsing, query: str):  # noqa: F811
    return browsing.get("/search/", {"q": query})


def test_a_standardized_block_hash_jumps_to_the_block(browsing, fleet) -> None:  # noqa: F811
    response = _search(browsing, str(std(2)))
    assert response.status_code == 302
    assert response["Location"] == f"/blocks/{MODEL}/{std(2)}/"


def test_a_block_hash_in_hex_is_read_too(browsing, fleet) -> None:  # noqa: F811
    assert _search(browsing, hex(std(2)))["Location"] == f"/blocks/{MODEL}/{std(2)}/"


def test_an_engine_hash_resolves_through_the_streams_engine_blocks(browsing, fleet) -> None:  # noqa: F811
    response = _search(browsing, engine_hash(3))
    assert response.status_code == 302
    assert response["Location"] == f"/blocks/{MODEL}/{std(3)}/"


@pytest.mark.parametrize(
    "form",
    [
        lambda value: str(value - 2**64),  # signed, as SGLang logs it
        lambda value: hex(value),  # as an engine prints an integer in hex
        lambda value: f"{value:016X}",  # hex without 0x, upper case
    ],
    ids=["signed", "0x hex", "bare hex"],
)
def test_an_engine_hash_is_found_in_every_form_engines_print(browsing, fleet, form) -> None:  # noqa: F811
    """The mapping key holds vLLM's unsigned decimal; the same 64 bits in other spellings
    find it too."""
    response = _search(browsing, form(int(engine_hash(3))))
    assert response.status_code == 302
    assert response["Location"] == f"/blocks/{MODEL}/{std(3)}/"


def test_an_unsigned_query_finds_a_signed_key() -> None:
    """SGLang's keys hold signed decimals: an unsigned (or hex) query asks for that form too."""
    assert "-5" in engine_hash_texts(str(2**64 - 5))
    assert "-5" in engine_hash_texts("0xfffffffffffffffb")
    assert engine_hash_texts(str(2**64)) == [], "past 64 bits: no engine hash"
    assert engine_hash_texts("a" * 32) == ["a" * 32], "digest hex stays as it is"


def test_a_pod_jumps_to_its_page_and_a_part_of_a_name_lists_candidates(
    browsing,  # noqa: F811
    fleet,
) -> None:
    assert _search(browsing, "vllm-1.default")["Location"] == "/pods/vllm-1.default/"
    listed = _search(browsing, "vllm-")
    assert listed.status_code == 200
    assert 'href="/pods/vllm-0.default/"' in listed.text
    assert 'href="/pods/vllm-1.default/"' in listed.text
    assert '<p class="match-count" id="search-count">2 matches' in listed.text


def test_a_model_jumps_to_its_blocks(browsing, fleet) -> None:  # noqa: F811
    # MODEL as the URL escapes it: the test is about the exact redirect
    assert _search(browsing, MODEL)["Location"] == "/blocks/?model=Qwen%2FQwen3-8B"


def test_a_decision_id_and_a_request_id_find_the_decision(browsing, fleet) -> None:  # noqa: F811
    decision = score(
        MODEL, token_ids=[t for n in range(3) for t in block_tokens(n)], request_id="req-42"
    )
    page = f"/decisions/{decision.log_id}/"

    assert _search(browsing, decision.decision_id)["Location"] == page
    assert _search(browsing, "req-42")["Location"] == page
    shown = browsing.get(page)
    assert (
        shown.status_code == 200 and decision.decision_id in shown.text and "req-42" in shown.text
    )


def test_nothing_found_says_what_was_tried(browsing, fleet) -> None:  # noqa: F811
    response = _search(browsing, "12345")
    assert response.status_code == 200
    assert 'id="search-none"' in response.text
    assert "a block hash, an engine hash, a pod, a model" in response.text


def test_the_box_is_in_every_pages_header(browsing, fleet) -> None:  # noqa: F811
    html = browsing.get("/pods/").text
    assert '<form class="site-search" role="search" method="get" action="/search/">' in html
