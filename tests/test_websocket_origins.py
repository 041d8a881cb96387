"""The websocket origin rule: the site's own scheme, host and port, or CSRF_TRUSTED_ORIGINS."""

import pytest
from django.test import override_settings

from kvadmin.live.origins import origin_allowed


def scope(origin: str | None, host: str = "kvadmin.example:8000", scheme: str = "ws") -> dict:
    headers = [(b"host", host.encode())]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    return {"type": "websocket", "scheme": scheme, "headers": headers}


@override_settings(ALLOWED_HOSTS=["kvadmin.example"], CSRF_TRUSTED_ORIGINS=[])
@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        ("http://kvadmin.example:8000", True),
        ("http://KVADMIN.example:8000", True),
        ("http://kvadmin.example:3000", False),
        ("http://kvadmin.example", False),
        ("https://kvadmin.example:8000", False),
        ("http://evil.example:8000", False),
        ("null", False),
        ("", False),
        (None, False),
    ],
)
def test_only_the_own_origin_is_allowed(origin, allowed) -> None:
    assert origin_allowed(scope(origin)) is allowed


@override_settings(ALLOWED_HOSTS=["kvadmin.example"])
def test_default_ports_are_the_same_origin() -> None:
    assert origin_allowed(scope("https://kvadmin.example", "kvadmin.example", "wss"))
    assert origin_allowed(scope("https://kvadmin.example:443", "kvadmin.example", "wss"))
    assert not origin_allowed(scope("http://kvadmin.example", "kvadmin.example", "wss"))


@override_settings(ALLOWED_HOSTS=["kvadmin.example"])
def test_a_host_outside_allowed_hosts_is_refused_even_from_its_own_origin() -> None:
    assert not origin_allowed(scope("http://other.example:8000", "other.example:8000"))


@override_settings(
    ALLOWED_HOSTS=["kvadmin.internal"],
    CSRF_TRUSTED_ORIGINS=["https://ops.example.com", "https://*.proxy.example"],
)
def test_trusted_origins_name_scheme_host_and_port() -> None:
    """Behind a TLS proxy the browser's origin is the proxy's, not the server's Host."""
    assert origin_allowed(scope("https://ops.example.com", "kvadmin.internal:8000"))
    assert not origin_allowed(scope("https://ops.example.com:8443", "kvadmin.internal:8000"))
    assert not origin_allowed(scope("http://ops.example.com", "kvadmin.internal:8000"))
    assert origin_allowed(scope("https://a.proxy.example", "kvadmin.internal:8000"))
    assert not origin_allowed(scope("https://a.proxy.example:3000", "kvadmin.internal:8000"))
