"""/blocks/ sorts on the server over every block that matches, not the rows a browser loaded:
oldest first exactly, by owners within a bounded window the page names; the sort lives in the
URL, the next page and the export."""

import csv
import io
import re

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvadmin.residency.listing import PAGE_SIZE
from kvadmin.residency.ranking import newest_window
from scoring import keys
from tests.conftest import examples
from tests.index import NOW, std
from tests.residency.test_blocks_pagination import _stores, index_of

pytestmark = pytest.mark.django_db

MORE = re.compile(r'<tr class="more" hx-get="([^"]+)"')


def _listed(html: str) -> list[str]:
    return re.findall(r'<tr class="block-row">\s*<td><a href="[^"]+"><code>(\d+)</code>', html)


def _every_page(browsing, params: dict[str, str]) -> tuple[list[str], str]:
    """Every block of every page, following the next-page links; and the first page."""
    first = browsing.get("/blocks/", params)
    assert first.status_code == 200
    listed, html = _listed(first.text), first.text
    while found := MORE.findall(html):
        html = browsing.get(found[0].replace("&amp;", "&"), headers={"HX-Request": "true"}).text
        listed += _listed(html)
    return listed, first.text


@pytest.fixture
def shared_oldest(index):
    """Blocks 0..PAGE_SIZE+9 on vllm-0, one second apart (block 0 oldest); block 0 is also on
    vllm-1 and vllm-2, block 1 also on vllm-1: the most shared blocks are the oldest, so
    none is on the first page newest first."""
    for n in range(PAGE_SIZE + 10):
        index.store("vllm-0.default", [n], at=NOW + n)
    index.store("vllm-1.default", [0, 1], at=NOW)
    index.store("vllm-2.default", [0], at=NOW)
    return [str(std(n)) for n in range(PAGE_SIZE + 10)]


def test_oldest_first_covers_every_block_across_pages(browsing, shared_oldest) -> None:
    listed, first = _every_page(browsing, {"sort": "last-stored", "dir": "asc"})

    assert listed == shared_oldest
    assert 'id="blocks-sorted">oldest first' in first
    assert 'aria-sort="ascending" data-sort-key="last-stored"' in first
    assert "sort=last-stored&amp;dir=asc" in MORE.findall(first)[0]


def test_most_owners_first_ranks_blocks_beyond_the_first_page(browsing, shared_oldest) -> None:
    newest_first, _ = _every_page(browsing, {})
    assert shared_oldest[0] not in newest_first[:PAGE_SIZE]

    listed, first = _every_page(browsing, {"sort": "owners", "dir": "desc"})

    # Most owners first, then newest: every block once across pages.
    assert listed == [shared_oldest[0], shared_oldest[1], *reversed(shared_oldest[2:])]
    assert 'id="blocks-sorted">most owners first' in first
    assert 'id="blocks-window"' not in first, "the window held every block"
    fewest, _ = _every_page(browsing, {"sort": "owners", "dir": "asc"})
    assert fewest == list(reversed(listed))


def test_the_sort_by_owners_says_when_its_window_left_blocks_out(
    browsing, shared_oldest, monkeypatch
) -> None:
    monkeypatch.setattr("kvadmin.residency.ranking.SORT_WINDOW", 20)

    listed, first = _every_page(browsing, {"sort": "owners"})

    assert listed == list(reversed(shared_oldest))[:20]
    assert re.search(r'id="blocks-window">among the newest 20 blocks only', first)


def test_the_export_follows_the_sort(browsing, shared_oldest) -> None:
    response = browsing.get("/blocks/", {"sort": "owners"})
    [export] = re.findall(r'href="(/blocks/export\.csv\?[^"]+)"', response.text)
    rows = list(csv.DictReader(io.StringIO(browsing.get(export.replace("&amp;", "&")).text)))

    assert [row["block"] for row in rows[:2]] == shared_oldest[:2]
    assert len(rows) == len(shared_oldest)


@pytest.mark.parametrize(
    ("params", "said"),
    [
        ({"sort": "block"}, "blocks sort by last-stored or owners"),
        ({"dir": "up"}, "use asc or desc"),
        ({"sort": "owners", "after": "12-34"}, "is not a cursor"),
    ],
)
def test_a_bad_sort_is_a_clear_error(browsing, shared_oldest, params, said) -> None:
    response = browsing.get("/blocks/", params)

    assert response.status_code == 400
    assert said in response.text


@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(stores=_stores, size=st.integers(1, 15))
def test_the_window_holds_the_blocks_of_the_newest_copies(
    redis_client: redis.Redis, stores, size: int
) -> None:
    """Against a brute force: every copy read, the size-th newest's time the threshold."""
    index_of(redis_client, stores)
    zsets = [
        keys.residency_key(p, m) for p in ("a-0.ns", "a-1.ns", "a-2.ns") for m in ("GPU", "CPU")
    ]
    copies = sorted(
        (
            (int(ts), std)
            for key in zsets
            for std, ts in redis_client.zrange(key, 0, -1, withscores=True)
        ),
        reverse=True,
    )
    threshold = copies[size - 1][0] if len(copies) > size else 0
    newest: dict[str, int] = {}
    for ts, member in copies:
        if ts >= threshold:
            newest[member] = max(newest.get(member, 0), ts)

    window, whole = newest_window(redis_client, zsets, size)

    assert window == sorted(((ts, member) for member, ts in newest.items()), reverse=True)
    assert whole == (len(copies) <= size)
