"""/blocks/ pages: a cursor position (store time, std), infinite scroll through htmx `revealed`,
every block exactly once across pages whatever the ties and shared blocks."""

import re

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvadmin.residency.blocks import BlocksQuery, browse_blocks
from kvadmin.residency.listing import PAGE_SIZE, Position
from scoring import keys
from tests.conftest import examples
from tests.index import MODEL, NOW, IngestedIndex, std

pytestmark = pytest.mark.django_db

MORE = re.compile(r'<tr class="more" hx-get="([^"]+)" hx-trigger="revealed"')


def _rows(html: str) -> int:
    return html.count('<tr class="block-row">')


def test_exactly_one_page_of_blocks_has_no_next_page(browsing, index) -> None:
    index.store("vllm-0.default", range(PAGE_SIZE), at=NOW)

    response = browsing.get("/blocks/")

    assert _rows(response.text) == PAGE_SIZE
    assert MORE.search(response.text) is None


def test_one_block_more_than_a_page_scrolls_to_a_second_page(browsing, index) -> None:
    index.store("vllm-0.default", range(PAGE_SIZE + 1), at=NOW)

    first = browsing.get("/blocks/")
    [next_url] = MORE.findall(first.text)
    second = browsing.get(next_url.replace("&amp;", "&"), headers={"HX-Request": "true"})

    assert _rows(first.text) == PAGE_SIZE
    assert second.status_code == 200
    assert _rows(second.text) == 1
    assert "<html" not in second.text  # rows only, appended in place of the sentinel
    assert MORE.search(second.text) is None
    listed = re.findall(r"<code>(\d+)</code>", first.text + second.text)
    assert sorted(listed) == sorted(str(std(n)) for n in range(PAGE_SIZE + 1))


def test_the_next_page_keeps_the_filters(browsing, index) -> None:
    index.store("vllm-0.default", range(PAGE_SIZE + 5), at=NOW)
    index.offload("vllm-0.default", range(PAGE_SIZE + 2), "CPU", at=NOW + 1)
    index.store("vllm-1.default", range(100, 110), at=NOW + 2)

    first = browsing.get("/blocks/", {"model": MODEL, "pod": "vllm-0.default", "medium": "CPU"})
    [next_url] = MORE.findall(first.text)
    second = browsing.get(next_url.replace("&amp;", "&"), headers={"HX-Request": "true"})

    assert "pod=vllm-0.default" in next_url and "medium=CPU" in next_url
    assert _rows(first.text) + _rows(second.text) == PAGE_SIZE + 2


def test_a_bad_cursor_is_a_clear_error(browsing, index) -> None:
    index.store("vllm-0.default", [1], at=NOW)

    response = browsing.get("/blocks/", {"model": MODEL, "after": "yesterday"})

    assert response.status_code == 400
    assert "is not a cursor" in response.text


def test_a_cursor_between_blocks_of_one_second_resumes_exactly_there(redis_client) -> None:
    IngestedIndex(redis_client).store("vllm-0.default", range(10), at=NOW)
    ordered = sorted((str(std(n)) for n in range(10)), reverse=True)
    # Nobody holds this one; it sorts between the 5th and 6th block of that second.
    between = ordered[5] + "0"
    assert ordered[5] < between < ordered[4]

    at = keys.residency_score(NOW)
    at_member = browse_blocks(BlocksQuery(after=Position(at, ordered[4])), limit=3)
    at_gap = browse_blocks(BlocksQuery(after=Position(at, between)), limit=3)

    assert [row.std for row in at_member.rows] == ordered[5:8]
    assert [row.std for row in at_gap.rows] == ordered[5:8]
    assert at_gap.next_cursor == Position(at, ordered[7])


# Stores of 12 blocks by 3 pods in 2 media, at few distinct times, some within one second (the
# ingestion scores to the microsecond): many ties, many blocks held by several pods or in two
# media, some removed again.
_stores = st.lists(
    st.tuples(
        st.sampled_from(["a-0.ns", "a-1.ns", "a-2.ns"]),
        st.lists(st.integers(0, 11), min_size=1, max_size=4, unique=True),
        st.sampled_from(["GPU", "CPU", "remove"]),
        st.sampled_from([0, 0.25, 0.5, 1, 3]),
    ),
    min_size=1,
    max_size=25,
)


def index_of(redis_client: redis.Redis, stores) -> IngestedIndex:
    """An empty index, then `stores` (examples of `_stores`) applied through the writer."""
    redis_client.flushdb()
    index = IngestedIndex(redis_client)
    for pod, blocks, action, second in stores:
        if action == "remove":
            index.remove(pod, blocks, "GPU", at=NOW + second)
        elif action == "GPU":
            index.store(pod, blocks, "GPU", at=NOW + second)
        else:
            index.offload(pod, blocks, "CPU", at=NOW + second)
    return index


@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    stores=_stores,
    limit=st.integers(1, 5),
    medium=st.sampled_from([None, "GPU", "CPU"]),
    descending=st.booleans(),
)
def test_paging_lists_every_block_once_at_its_newest_position(
    redis_client: redis.Redis, stores, limit: int, medium: str | None, descending: bool
) -> None:
    """Newest first or oldest first, by the time each block was last stored anywhere."""
    index_of(redis_client, stores)
    newest: dict[str, float] = {}
    for pod in ("a-0.ns", "a-1.ns", "a-2.ns"):
        for held in [medium] if medium else ["GPU", "CPU"]:
            for member, score in redis_client.zrange(
                keys.residency_key(pod, held), 0, -1, withscores=True
            ):
                newest[member] = max(newest.get(member, 0), score)
    expected = [
        (keys.residency_seconds(ts), s)
        for ts, s in sorted(((ts, s) for s, ts in newest.items()), reverse=descending)
    ]

    listed, after = [], None
    for _ in range(len(expected) + 2):
        query = BlocksQuery(medium=medium, descending=descending, after=after)
        page = browse_blocks(query, limit=limit)
        listed += [(row.ts, row.std) for row in page.rows]
        if page.next_cursor is None:
            break
        after = page.next_cursor
    assert listed == expected


@pytest.mark.parametrize("descending", [True, False])
def test_a_page_stops_early_when_it_skips_many_blocks_and_resumes_after_them(
    redis_client, monkeypatch, descending
) -> None:
    """Blocks another pod re-stored more recently are listed there: skipping them is bounded
    work per request, so a page may come back short, with a cursor to carry on from."""
    monkeypatch.setattr("kvadmin.residency.listing.MAX_ROUNDS", 2)
    index = IngestedIndex(redis_client)
    index.store("vllm-0.default", range(40), at=NOW)  # listed at their newer store on vllm-1
    index.store("vllm-1.default", range(40), at=NOW + 1)
    index.store("vllm-0.default", [99], at=NOW - 1 if descending else NOW + 2)

    listed, short_pages, after = [], 0, None
    for _ in range(100):
        page = browse_blocks(BlocksQuery(descending=descending, after=after), limit=3)
        listed += [row.std for row in page.rows]
        short_pages += len(page.rows) < 3 and page.next_cursor is not None
        if page.next_cursor is None:
            break
        after = page.next_cursor

    assert sorted(listed) == sorted(str(std(n)) for n in [*range(40), 99])
    assert listed[-1] == str(std(99))
    assert short_pages > 0
