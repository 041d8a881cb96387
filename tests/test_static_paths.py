"""/static/ through the real ASGI server: files are served, paths that leave the static
directories are a 400 with a message (they answered 500)."""

import http.client
from urllib.parse import urlsplit

import pytest

from tests.waiting import patient


def _get(asgi_server: str, path: str) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection(urlsplit(asgi_server).netloc, timeout=patient(5))
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_a_static_file_is_served(asgi_server) -> None:
    status, body = _get(asgi_server, "/static/kvadmin/kvadmin.css")
    assert status == 200 and b"--fg" in body


@pytest.mark.parametrize(
    "path",
    [
        "/static/..",
        "/static/../",
        "/static/../kvadmin/settings.py",
        "/static/%2e%2e/x",
        "/static/..%2fmanage.py",
        "/static/kvadmin/../../manage.py",
    ],
)
def test_a_path_leaving_the_static_directories_is_a_400(asgi_server, path) -> None:
    status, body = _get(asgi_server, path)
    assert status == 400 and b"leaves the static directories" in body


def test_a_missing_file_is_a_404(asgi_server) -> None:
    assert _get(asgi_server, "/static/nope.css")[0] == 404
