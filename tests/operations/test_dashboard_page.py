"""The dashboard page: for logged-in people only; every tile is there on first load, with its
link to the page of details, and listens on the "dashboard" websocket for updates."""

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db
TILES = ("tile-engines", "tile-media", "tile-ingest", "tile-decisions", "hit-summary", "tile-gc")


def test_it_needs_a_login(client: Client) -> None:
    response = client.get("/")

    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_every_tile_is_there_and_links_to_its_details(
    client: Client, django_user_model, redis_client
) -> None:
    client.force_login(django_user_model.objects.create_user("erin", password="pw-erin-12345"))

    html = client.get("/").content.decode()

    for tile in TILES:
        assert f'id="{tile}"' in html
    for page in ("/pods/", "/blocks/", "/feed/", "/weights/"):
        assert f'<h2><a href="{page}">' in html
    assert 'ws-connect="/ws/dashboard/"' in html
    assert "/static/vendor/uplot/uPlot.iife.min.js" in html
