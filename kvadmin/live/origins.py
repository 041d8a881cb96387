"""Which pages may open kvadmin's websockets: the site's own origin (scheme, host and port, the
host one of ALLOWED_HOSTS) or one listed in CSRF_TRUSTED_ORIGINS, as Django's CSRF check
decides for forms.

channels' AllowedHostsOriginValidator compares host names only, so a page served on
localhost:3000 could open the live feed with the operator's cookies. A socket without an
Origin header is refused too: browsers always send one.
"""

from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from django.utils.http import is_same_domain

DEFAULT_PORTS = {"http": 80, "https": 443}
Origin = tuple[str, str, int]


def _origin(scheme: str, netloc: str) -> Origin | None:
    """(scheme, host, port) with the default port filled in; None when it does not parse."""
    try:
        parts = urlsplit(f"{scheme}://{netloc}")
        port = parts.port or DEFAULT_PORTS.get(scheme)
    except ValueError:
        return None
    if not parts.hostname or port is None or parts.path or parts.query:
        return None
    return scheme, parts.hostname.lower(), port


def _parsed(url: str) -> Origin | None:
    scheme, _, netloc = url.partition("://")
    return _origin(scheme.lower(), netloc) if netloc else None


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    values = [value for key, value in scope.get("headers", ()) if key == name]
    return values[0].decode("latin1") if len(values) == 1 else None


def _trusted(origin: Origin, trusted: Iterable[str]) -> bool:
    scheme, host, port = origin
    for pattern in trusted:
        if "*" not in pattern:
            if _parsed(pattern) == origin:
                return True
            continue
        wanted = _parsed(pattern.replace("*", "wildcard", 1))
        if wanted is None or wanted[0] != scheme or wanted[2] != port:
            continue
        if is_same_domain(host, wanted[1].removeprefix("wildcard")):
            return True
    return False


def origin_allowed(scope: dict[str, Any]) -> bool:
    origin_header, host_header = _header(scope, b"origin"), _header(scope, b"host")
    if not origin_header or not host_header:
        return False
    origin = _parsed(origin_header)
    if origin is None:
        return False
    if _trusted(origin, settings.CSRF_TRUSTED_ORIGINS):
        return True
    domain, _ = split_domain_port(host_header)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return False
    own_scheme = "https" if scope.get("scheme") in ("wss", "https") else "http"
    return origin == _origin(own_scheme, host_header)


class SameOriginValidator:
    """ASGI middleware for websocket scopes: refuse (403) a socket from any other origin."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if not origin_allowed(scope):
            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)
