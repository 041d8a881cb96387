"""The feed filters by tie, no hit, policy and stale load (besides model and pod), keeps the
filter in the URL and the socket's, counts what it shows, and exports the matching decisions
as CSV."""

import csv
import io

import msgspec
import pytest

from kvadmin.routing import decisions
from kvadmin.routing.consumers import FeedFilter
from tests.routing.feed_socket import decision

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(client, django_user_model):
    """Bob is logged in."""
    client.force_login(django_user_model.objects.create_user("bob", password="pw-bob-12345"))
    return client


@pytest.fixture
def logged(redis_client) -> None:
    """Four decisions: a plain ttft one, a tie, one without any hit, one with a stale load."""
    plain = msgspec.structs.replace(decision("plain"), policy="ttft")
    tie = msgspec.structs.replace(decision("tie"), tie_break=True, policy="kthena")
    miss = msgspec.structs.replace(decision("miss"), longest_match=0, scores=[], tie_break=True)
    stale = msgspec.structs.replace(
        decision("stale"), stale_loads=["vllm-9.default"], policy="ttft"
    )
    for one in (plain, tie, miss, stale):
        decisions.append(one)


def _shown(operator, query: str) -> set[str]:
    html = operator.get(f"/feed/?{query}").content.decode()
    return {r for r in ("plain", "tie", "miss", "stale") if f'data-request-id="{r}"' in html}


def test_each_filter_keeps_what_it_names(operator, logged) -> None:
    assert _shown(operator, "") == {"plain", "tie", "miss", "stale"}
    assert _shown(operator, "tie=1") == {"tie", "miss"}
    assert _shown(operator, "no_hit=1") == {"miss"}
    assert _shown(operator, "stale_load=1") == {"stale"}
    assert _shown(operator, "policy=ttft") == {"plain", "stale"}
    assert _shown(operator, "policy=kthena") == {"tie", "miss"}, "no policy recorded: kthena"
    assert _shown(operator, "tie=1&policy=kthena&no_hit=1") == {"miss"}


def test_the_filter_rides_in_the_url_the_socket_and_the_count(operator, logged) -> None:
    html = operator.get("/feed/?tie=1&policy=kthena").content.decode()
    assert 'ws-connect="/ws/feed/?policy=kthena&amp;tie=1"' in html
    assert '<input type="checkbox" name="tie" value="1" data-submit-on-change checked>' in html
    assert "2 of the 4 decisions in the log match, newest first over the whole log" in html
    assert 'href="/feed/export.csv?policy=kthena&amp;tie=1" download' in html


def test_the_socket_reads_the_same_filter() -> None:
    chosen = FeedFilter.from_query(b"stale_load=1&policy=ttft&tie=0")
    assert chosen == FeedFilter(policy="ttft", stale_load=True)
    assert FeedFilter.from_query(b"policy=nonsense") == FeedFilter()


def test_the_export_holds_the_matching_decisions(operator, logged) -> None:
    response = operator.get("/feed/export.csv?tie=1")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [row["request"] for row in rows] == ["miss", "tie"]
    assert rows[1]["tie"] == "yes" and rows[1]["policy"] == "kthena"
    assert rows[1]["chosen"] == "vllm-0.default" and rows[1]["score"] == "70"
