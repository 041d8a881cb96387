"""Who may read /metrics: a client address in KVADMIN_METRICS_ALLOW, an API token with the
`metrics` scope, or a logged-in staff user; who may see the details of /readyz: a token or a
staff user.

Addresses and networks are comma-separated (`10.0.0.0/8,127.0.0.1`). The address is the
client as the web server reports it: the connection's peer, or the X-Forwarded-For of a proxy
listed in KVADMIN_TRUSTED_PROXIES (kvadmin/web_server.py); never a header from anyone else.
"""

import ipaddress
import logging
from functools import cache

from django.http import HttpRequest

from kvadmin.api.auth import authenticate
from kvadmin.api.scopes import Scope
from kvadmin.conf import knob

log = logging.getLogger(__name__)

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@cache
def allowed_networks(setting: str) -> tuple[Network, ...]:
    networks = []
    for item in setting.split(","):
        if not item.strip():
            continue
        try:
            networks.append(ipaddress.ip_network(item.strip(), strict=False))
        except ValueError:
            log.warning("KVADMIN_METRICS_ALLOW: %r is not an address or network; ignored", item)
    return tuple(networks)


def address_allowed(address: str) -> bool:
    try:
        peer = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(peer in network for network in allowed_networks(knob("METRICS_ALLOW")))


def _is_staff(request: HttpRequest) -> bool:
    user = getattr(request, "user", None)
    return user is not None and user.is_authenticated and user.is_staff


def is_staff_or_token(request: HttpRequest) -> bool:
    return _is_staff(request) or authenticate(request) is not None


def may_read_metrics(request: HttpRequest) -> bool:
    if address_allowed(request.META.get("REMOTE_ADDR", "")) or _is_staff(request):
        return True
    token = authenticate(request)
    return token is not None and token.grants.allows(Scope.METRICS)
