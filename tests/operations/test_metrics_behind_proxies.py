"""/metrics' allow-list through the real web server: X-Forwarded-For is believed only from a
proxy listed in KVADMIN_TRUSTED_PROXIES (none by default), so a local process cannot claim an
allowed address."""

import urllib.error
import urllib.request
from collections.abc import Callable, Iterator

import pytest

from kvadmin.web_server import proxy_options
from tests.conftest import start_asgi_server, stop_process
from tests.waiting import patient

ALLOWED = "10.0.0.0/8"


@pytest.fixture
def web_server(subprocess_env: dict[str, str]) -> Iterator[Callable[..., str]]:
    """Start real web servers with /metrics allowed to ALLOWED (more settings as given); all stopped
    after the test."""
    started = []

    def start(**env: str) -> str:
        process, url = start_asgi_server(subprocess_env | {"KVADMIN_METRICS_ALLOW": ALLOWED} | env)
        started.append(process)
        return url

    yield start
    for process in started:
        stop_process(process)


def _scrape(url: str, forwarded_for: str) -> int:
    request = urllib.request.Request(f"{url}/metrics", headers={"X-Forwarded-For": forwarded_for})
    try:
        with urllib.request.urlopen(request, timeout=patient(5)) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_by_default_a_forwarded_address_is_not_believed(web_server) -> None:
    assert _scrape(web_server(), "10.1.2.3") == 401


def test_a_configured_proxy_is_believed(web_server) -> None:
    url = web_server(KVADMIN_TRUSTED_PROXIES="127.0.0.1")
    assert _scrape(url, "10.1.2.3") == 200
    assert _scrape(url, "192.168.1.9") == 401


def test_the_options_follow_the_setting() -> None:
    assert proxy_options("") == ["--no-proxy-headers"]
    assert proxy_options(" 10.0.0.1, 10.1.0.0/16 ") == [
        "--proxy-headers",
        "--forwarded-allow-ips",
        "10.0.0.1,10.1.0.0/16",
    ]
