"""The feed orders the whole decision log on the server (newest, highest score, slowest), not
the rows a browser holds: the first page is the top of the whole log, further pages follow
after a cursor, counts say how many of the log's decisions match, and the export follows."""

import csv
import io
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import parse_qsl, urlsplit

import pytest

from kvadmin.routing import decisions, ordering
from kvadmin.routing.consumers import FEED_ROWS, FeedFilter
from scoring.keys import DECISIONS_KEY
from tests.routing.feed_socket import decision

pytestmark = pytest.mark.django_db

COUNT = FEED_ROWS * 2 + 7


@pytest.fixture
def operator(client, django_user_model):
    """Bob is logged in."""
    client.force_login(django_user_model.objects.create_user("bob", password="pw-bob-12345"))
    return client


@pytest.fixture
def logged(redis_client) -> list[str]:
    """COUNT decisions, the oldest scoring highest and running slowest; every third a tie.
    Returns their request ids, oldest first."""
    ids = []
    for n in range(COUNT):
        one = decision(f"r{n}")
        one.scores[0].score = COUNT - n
        one.timings_ms["total"] = (COUNT - n) / 7  # floats that do not print short
        one.tie_break = n % 3 == 0
        decisions.append(one)
        ids.append(f"r{n}")
    return ids


def _shown(html: str) -> list[str]:
    return re.findall(r'<details class="decision" id="[^"]+" data-request-id="([^"]+)"', html)


def _every_page(operator, query: str) -> tuple[list[str], str]:
    """Every row of the first page and of each further page, as the pager asks for them."""
    first = operator.get(f"/feed/?{query}").content.decode()
    html, shown = first, _shown(first)
    while after := re.search(r'id="feed-more" class="feed-more" data-after="([^"]+)">', html):
        [url] = re.findall(r'hx-get="(/feed/rows/[^"]*)"', html)
        params = dict(parse_qsl(urlsplit(url.replace("&amp;", "&")).query), after=after[1])
        response = operator.get("/feed/rows/", params)
        assert response.status_code == 200
        html = response.content.decode()
        shown += _shown(html)
    return shown, first


@pytest.mark.parametrize("order", ["score", "latency"])
def test_sorted_pages_cover_the_whole_log(operator, logged, order) -> None:
    shown, first = _every_page(operator, f"order={order}")

    assert shown == logged, "the oldest ranks first: it is beyond the newest FEED_ROWS"
    assert _shown(first) == logged[:FEED_ROWS]
    assert f'<option value="{order}" selected>' in first
    assert f'ws-connect="/ws/feed/?order={order}"' in first
    assert f"{COUNT} of the {COUNT} decisions in the log match" in first


def test_newest_first_pages_too_and_counts_the_filter(operator, logged) -> None:
    shown, first = _every_page(operator, "tie=1")

    ties = [r for n, r in enumerate(logged) if n % 3 == 0]
    assert shown == list(reversed(ties))
    assert f"{len(ties)} of the {COUNT} decisions in the log match, newest first" in first


def test_a_page_after_a_cursor_stays_put_while_decisions_arrive(operator, logged) -> None:
    first = operator.get("/feed/?order=score").content.decode()
    after = re.search(r'data-after="([^"]*)"', first)[1]
    # A new decision scoring above everything: it belongs to the first page, not the second.
    top = decision("new-top")
    top.scores[0].score = 10 * COUNT
    decisions.append(top)

    second = operator.get("/feed/rows/", {"order": "score", "after": after}).content.decode()

    assert _shown(second) == logged[FEED_ROWS : 2 * FEED_ROWS]


def test_the_export_follows_the_order(operator, logged) -> None:
    response = operator.get("/feed/export.csv?order=latency")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [row["request"] for row in rows] == logged


@pytest.mark.parametrize("after", ["", "yesterday", "1_2", "nan_1-2", "inf_1-2"])
def test_a_bad_cursor_is_a_clear_error(operator, logged, after) -> None:
    response = operator.get("/feed/rows/", {"order": "score", "after": after})
    assert response.status_code == 400
    assert "is not a feed cursor" in response.content.decode()


def test_the_socket_reads_the_order() -> None:
    assert FeedFilter.from_query(b"order=latency").order == "latency"
    assert FeedFilter.from_query(b"order=nonsense") == FeedFilter()


def test_each_page_sees_what_the_log_gained_and_trimmed(operator, logged, redis_client) -> None:
    """The process keeps the log's summaries between pages: a later page still sees the
    decisions appended since and not those the cap trimmed."""
    assert f"{COUNT} of the {COUNT} decisions" in operator.get("/feed/?order=score").text
    redis_client.xtrim(DECISIONS_KEY, maxlen=5, approximate=False)
    best = decision("best")
    best.scores[0].score = 10 * COUNT
    decisions.append(best)

    html = operator.get("/feed/?order=score").text

    assert "6 of the 6 decisions" in html
    assert _shown(html) == ["best", *logged[-5:]]


def test_pages_arriving_together_read_a_cold_log_once(own_client) -> None:
    """After a start, a burst of pages (every feed reconnecting) makes one whole-log read; the
    others wait for it and then read only what is new. (On a redis-server of its own: its
    counters are this test's reads alone.)"""
    for n in range(3 * ordering._READ_COUNT):
        decisions.append(decision(f"r{n}"), client=own_client)
    projection, callers = ordering._Projection(), 4
    together = threading.Barrier(callers)

    def page() -> int:
        together.wait()
        return len(projection.current(own_client))

    own_client.config_resetstat()
    with ThreadPoolExecutor(callers) as pool:
        assert list(pool.map(lambda _: page(), range(callers))) == [3000] * callers
    xranges = own_client.info("commandstats")["cmdstat_xrange"]["calls"]
    # One cold read: the first entry, three full reads and an empty one; each other page: the
    # first entry and one empty read.
    assert xranges <= 5 + 2 * (callers - 1)
