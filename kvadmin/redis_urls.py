"""The one reader of kvadmin's Redis URLs, and what each client library is given for one.

A Redis URL (`REDIS_URL`, `CELERY_BROKER_URL`) is either
- one server, as redis-py reads it: `redis://[[user]:password@]host:port/db`, `rediss://...`
  (TLS) or `unix:///path?db=N`; or
- a primary that Sentinel watches: `redis+sentinel://[[user]:password@]h1:26379,h2:26379/<master>/<db>`,
  one or more Sentinels (port 26379 when left out), the name they monitor the primary under, and
  the logical database (0 when left out). The credentials are the primary's (and its replicas');
  the Sentinels are asked without.

Every role follows a failover with its library's own Sentinel support, configured here: redis-py's
`Sentinel` for the index and request-path clients (`client`, `async_client`), kombu's sentinel
transport for the Celery broker and result backend (`celery_url`), channels-redis's `sentinels`
hosts (`channel_host`) and django-redis's `SentinelClient` for the cache (`cache`). A client
asks a Sentinel for the primary's address whenever it connects, so after a promotion its next
connection reaches the new primary; until then its commands fail as in any outage.

Pure: no Django settings (settings.py builds its sections with it).
"""

import re
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import redis
import redis.asyncio
import redis.asyncio.sentinel
import redis.sentinel

SENTINEL_SCHEME = "redis+sentinel"
PLAIN_SCHEMES = ("redis", "rediss", "unix")
SENTINEL_PORT = 26379
SENTINEL_TIMEOUT_SECONDS = 1.0
"""A Sentinel answers a query for the primary at once; one that does not is skipped for the
next. Also for the ingest clients, whose own commands have no timeout."""


class InvalidRedisUrl(ValueError):
    """A Redis URL kvadmin cannot read; the message says which part and how to write it."""


@dataclass(frozen=True, slots=True)
class SentinelUrl:
    """A `redis+sentinel://` URL, read."""

    sentinels: tuple[tuple[str, int], ...]
    master: str
    db: int
    username: str | None = None
    password: str | None = None

    @property
    def credentials(self) -> dict[str, str]:
        """The primary's username and password, for the connection kwargs."""
        found = {"username": self.username, "password": self.password}
        return {name: value for name, value in found.items() if value}

    @property
    def userinfo(self) -> str:
        """The credentials as a URL writes them before its hosts ("" for none)."""
        if not (self.username or self.password):
            return ""
        return f"{quote(self.username or '', safe='')}:{quote(self.password or '', safe='')}@"


_FORM = f"{SENTINEL_SCHEME}://h1:{SENTINEL_PORT},h2:{SENTINEL_PORT}/<master>/<db>"
_MASTER = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
"""The primary's name: django-redis reads it as a host name, which URLs lower-case."""


def parse_sentinel(url: str) -> SentinelUrl | None:
    """The Sentinel URL read, None for a URL of one server; InvalidRedisUrl for anything else."""
    scheme, _, rest = url.partition("://")
    if not rest:
        raise InvalidRedisUrl(f"{shown(url)!r} is not a URL: use redis://host:port/db or {_FORM}")
    if scheme in PLAIN_SCHEMES:
        return None
    if scheme != SENTINEL_SCHEME:
        raise InvalidRedisUrl(
            f"{shown(url)!r}: the scheme {scheme!r} is not one of "
            f"{', '.join(PLAIN_SCHEMES + (SENTINEL_SCHEME,))}"
        )
    netloc, _, path = rest.partition("/")
    userinfo, _, hosts = netloc.rpartition("@")
    username, _, password = userinfo.partition(":") if userinfo else ("", "", "")
    if "?" in path or "#" in path:
        raise InvalidRedisUrl(f"{shown(url)!r}: a Sentinel URL takes no query; use {_FORM}")
    parts = path.split("/") if path else []
    if not parts or not parts[0] or len(parts) > 2:
        raise InvalidRedisUrl(f"{shown(url)!r}: name the monitored primary: {_FORM}")
    master, db_text = parts[0], (parts[1] if len(parts) == 2 else "") or "0"
    if not _MASTER.match(master):
        raise InvalidRedisUrl(
            f"{shown(url)!r}: the primary's name {master!r} must be lower-case letters, digits, "
            "'.', '_' or '-' (sentinel monitor <name> ...)"
        )
    if not db_text.isdigit():
        raise InvalidRedisUrl(f"{shown(url)!r}: the database {db_text!r} is not a number")
    return SentinelUrl(
        tuple(_sentinel(url, host) for host in hosts.split(",")),
        master,
        int(db_text),
        unquote(username) or None,
        unquote(password) or None,
    )


def _sentinel(url: str, host: str) -> tuple[str, int]:
    if not host:
        raise InvalidRedisUrl(f"{shown(url)!r}: a Sentinel address is empty; use {_FORM}")
    if host.startswith("["):  # [::1]:26379
        name, _, port = host[1:].partition("]")
        port = port.removeprefix(":")
    else:
        name, _, port = host.rpartition(":") if ":" in host else (host, "", "")
    if not name or (port and not port.isdigit()) or (port and not 0 < int(port) < 65536):
        raise InvalidRedisUrl(f"{shown(url)!r}: {host!r} is not a host:port; use {_FORM}")
    return name, int(port) if port else SENTINEL_PORT


def shown(url: str) -> str:
    """`url` without a password, for messages."""
    scheme, sep, rest = url.partition("://")
    netloc, slash, path = rest.partition("/")
    userinfo, at, hosts = netloc.rpartition("@")
    if at and ":" in userinfo:
        netloc = f"{userinfo.partition(':')[0]}:***@{hosts}"
    return f"{scheme}{sep}{netloc}{slash}{path}"


def check(url: str) -> None:
    """InvalidRedisUrl unless kvadmin can read `url`."""
    if parse_sentinel(url) is None:
        try:
            redis.connection.parse_url(url)
        except ValueError as error:
            raise InvalidRedisUrl(f"{shown(url)!r}: {error}") from None


def with_db(url: str, offset: int) -> str:
    """The same Redis as `url`, `offset` logical databases further on."""
    sentinel = parse_sentinel(url)
    if sentinel is not None:
        return _unparse(replace(sentinel, db=sentinel.db + offset))
    parts = urlsplit(url)
    db = int(parts.path.strip("/") or 0) + offset
    return urlunsplit(parts._replace(path=f"/{db}"))


def _unparse(sentinel: SentinelUrl) -> str:
    hosts = ",".join(_address(host, port) for host, port in sentinel.sentinels)
    return f"{SENTINEL_SCHEME}://{sentinel.userinfo}{hosts}/{sentinel.master}/{sentinel.db}"


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _sentinel_kwargs() -> dict[str, float]:
    return {
        "socket_timeout": SENTINEL_TIMEOUT_SECONDS,
        "socket_connect_timeout": SENTINEL_TIMEOUT_SECONDS,
    }


def client(url: str, **kwargs: Any) -> redis.Redis:
    """A redis-py client of `url` (`kwargs` as `Redis.from_url` takes them); through Sentinel,
    one that connects to whichever server Sentinel names the primary."""
    sentinel = parse_sentinel(url)
    if sentinel is None:
        return redis.Redis.from_url(url, **kwargs)
    manager = redis.sentinel.Sentinel(sentinel.sentinels, sentinel_kwargs=_sentinel_kwargs())
    return manager.master_for(sentinel.master, db=sentinel.db, **sentinel.credentials, **kwargs)


def async_client(url: str, **kwargs: Any) -> redis.asyncio.Redis:
    """`client` for asyncio."""
    sentinel = parse_sentinel(url)
    if sentinel is None:
        return redis.asyncio.Redis.from_url(url, **kwargs)
    manager = redis.asyncio.sentinel.Sentinel(
        sentinel.sentinels, sentinel_kwargs=_sentinel_kwargs()
    )
    return manager.master_for(sentinel.master, db=sentinel.db, **sentinel.credentials, **kwargs)


def celery_url(url: str) -> tuple[str, dict[str, Any]]:
    """Celery's broker or result-backend URL for `url`, and its transport options: kombu's
    and Celery's sentinel transports take `sentinel://h1:p/db;sentinel://h2:p/db` and the
    primary's name as the `master_name` option."""
    sentinel = parse_sentinel(url)
    if sentinel is None:
        return url, {}
    hosts = ";".join(
        f"sentinel://{sentinel.userinfo}{_address(host, port)}/{sentinel.db}"
        for host, port in sentinel.sentinels
    )
    return hosts, {"master_name": sentinel.master, "sentinel_kwargs": _sentinel_kwargs()}


def channel_host(url: str, **kwargs: Any) -> dict[str, Any]:
    """One entry of channels-redis's `hosts` for `url` (`kwargs`: the connection's options)."""
    sentinel = parse_sentinel(url)
    if sentinel is None:
        return {"address": url, **kwargs}
    return {
        "sentinels": list(sentinel.sentinels),
        "master_name": sentinel.master,
        "sentinel_kwargs": _sentinel_kwargs(),
        "db": sentinel.db,
        **sentinel.credentials,
        **kwargs,
    }


def cache(url: str, options: dict[str, Any]) -> dict[str, Any]:
    """Django's CACHES entry (django-redis) for `url`; `options` are django-redis's OPTIONS.
    Through Sentinel: its `SentinelClient` and `SentinelConnectionFactory`, on the primary
    alone (a replica could answer with what the primary no longer holds)."""
    entry = {"BACKEND": "django_redis.cache.RedisCache"}
    sentinel = parse_sentinel(url)
    if sentinel is None:
        return entry | {"LOCATION": url, "OPTIONS": options}
    # A list of one location: SentinelClient would add a replica pool for reads to a string.
    return entry | {
        "LOCATION": [f"redis://{sentinel.master}/{sentinel.db}"],
        "OPTIONS": options
        | {
            "CLIENT_CLASS": "django_redis.client.SentinelClient",
            "CONNECTION_FACTORY": "django_redis.pool.SentinelConnectionFactory",
            "SENTINELS": list(sentinel.sentinels),
            "SENTINEL_KWARGS": _sentinel_kwargs(),
            **({"PASSWORD": sentinel.password} if sentinel.password else {}),
        },
    }
