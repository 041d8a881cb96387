"""/feed/: the newest decisions rendered with the same row fragment the socket sends, and each
row's explanation on demand."""

import pytest

from kvadmin.routing import decisions
from kvadmin.routing.presenters import row_html
from tests.routing.feed_socket import record

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(client, django_user_model):
    """Bob is logged in."""
    client.force_login(django_user_model.objects.create_user("bob", password="pw-bob-12345"))
    return client


def test_it_needs_a_login(client) -> None:
    response = client.get("/feed/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_it_shows_the_newest_rows_with_the_live_fragment(operator, redis_client) -> None:
    record("one", "two")
    record("three", model="m/b")
    page = operator.get("/feed/").content.decode()
    newest = decisions.recent(3)
    for decision in newest:
        assert row_html(decision) in page
    assert page.index('data-request-id="three"') < page.index('data-request-id="one"')
    assert 'ws-connect="/ws/feed/"' in page


def test_a_filter_narrows_the_rows_and_the_socket(operator, redis_client) -> None:
    record("one")
    record("three", model="m/b")
    page = operator.get("/feed/?model=m/b").content.decode()
    assert 'data-request-id="three"' in page and 'data-request-id="one"' not in page
    assert 'ws-connect="/ws/feed/?model=m%2Fb"' in page


def test_a_row_expands_to_the_per_pod_arithmetic(operator, redis_client) -> None:
    record("one")
    [decision] = decisions.recent(1)
    response = operator.get(f"/feed/decisions/{decision.log_id}/")
    assert response.status_code == 200
    html = response.content.decode()
    assert '<span class="badge m-gpu">GPU 2</span>' in html
    assert '<span class="badge m-cpu">CPU 1</span>' in html
    assert "= 2.8; 2.8 / 4 × 100 = 70 → <strong>70</strong>" in html
    assert "vllm-9.default" in html and "does not hold the first block" in html


def test_a_decision_gone_from_the_log_is_a_404(operator, redis_client) -> None:
    assert operator.get("/feed/decisions/1-0/").status_code == 404
