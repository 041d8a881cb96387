"""Index groups: which Redis primary holds a model's index (KVADMIN_INDEX_GROUPS), the one
owner of that fact.

The setting is a JSON object of model-name patterns to Redis URLs (`kvadmin.redis_urls`, so
`redis+sentinel://` too), read in its order:

    {"llama-*": "redis://10.0.0.2:6379/0", "qwen-?b": "redis://10.0.0.3:6379/0",
     "*": "redis://10.0.0.1:6379/0"}

- A pattern is a case-sensitive shell glob (`fnmatch.fnmatchcase`: `*`, `?`, `[abc]`, `[!a]`)
  over the served model name; the first pattern that matches names the model's group, and the
  group is named by its pattern (`manage.py index_move_model MODEL --to PATTERN`).
- `"*"`, the default group, is required and comes last (a pattern after it could never match).
- Two groups on one Redis database are refused: each group is one primary's index, the one
  kthena's routers for its models read.
- Unset (or empty): one group, `"*"` on INDEX_REDIS_URL (REDIS_URL), as before groups existed.

A group's primary holds everything written for its models' pods by ingestion: the matrix keys
kthena reads and kvadmin's bookkeeping beside them (stream status, leases, pods, residency). App
state stays on REDIS_URL: the broker, channels, the cache, the decision log, the routing state
(queues, in-flight and speculative entries, loads), the weights, the registry version, the push
queues and the metrics. So a decision reads the walk from its model's group and the routing
state from REDIS_URL (`kvadmin.routing.pipeline`).

Checked at start (`startup_problems`: by every Celery worker and `make run` before they go
on, and as Django system checks, `kvadmin.engines.index_groups`): no registered model matches
two patterns other than the default (an order-dependent choice between two named groups is
almost always a mistake; the default is the fallback by design), and every group answers, is
a primary (`ROLE` says master, not a replica) and no Redis Cluster node (`INFO cluster`).
"""

import asyncio
import fnmatch
import json
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

import redis
import redis.asyncio
from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from redis.backoff import NoBackoff
from redis.retry import Retry

from kvadmin import redis_clients, redis_urls
from kvadmin.conf import knob
from scoring import keys

DEFAULT_PATTERN = "*"
SETTING = "KVADMIN_INDEX_GROUPS"


class InvalidIndexGroups(ValueError):
    """KVADMIN_INDEX_GROUPS cannot be read; the message says what to write instead."""


@dataclass(frozen=True, slots=True)
class IndexGroup:
    """One Redis primary holding the index of the models its pattern matches."""

    pattern: str
    url: str

    @property
    def shown(self) -> str:
        """The group for messages and pages: its pattern and its Redis without a password."""
        return f"{self.pattern} ({redis_urls.shown(self.url)})"

    def matches(self, model: str) -> bool:
        return fnmatch.fnmatchcase(model, self.pattern)

    def client(self) -> redis.Redis:
        """Request-path client, text responses (`redis_clients.index_client`)."""
        return redis_clients.index_client(self.url)

    def async_client(self) -> redis.asyncio.Redis:
        """The running event loop's asyncio client of the group: one per loop, as asyncio
        connections belong to the loop that opens them, kept while the loop lives."""
        loop = asyncio.get_running_loop()
        clients = _async_clients.setdefault(loop, {})
        if self.url not in clients:
            clients[self.url] = redis_clients.async_index_client(self.url)
        return clients[self.url]

    def ingest_client(self) -> redis.Redis:
        """No socket timeout, for the ingest loop and the worker tasks' long scripts."""
        return redis_clients.ingest_client(self.url)

    def ingest_bytes_client(self) -> redis.Redis:
        return redis_clients.ingest_bytes_client(self.url)

    @property
    def is_app_redis(self) -> bool:
        """The group shares INDEX_REDIS_URL's database (the app state's)."""
        return _same_database(self.url, settings.INDEX_REDIS_URL)


_async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, Any]] = (
    weakref.WeakKeyDictionary()
)


def parse(text: str, default_url: str) -> tuple[IndexGroup, ...]:
    """The groups `text` (the setting's JSON) names, in order; `default_url`'s one group for
    an empty text. InvalidIndexGroups for anything else."""
    if not text.strip():
        return (IndexGroup(DEFAULT_PATTERN, default_url),)
    try:
        pairs = json.loads(text, object_pairs_hook=_refuse_repeats)
    except json.JSONDecodeError as error:
        raise InvalidIndexGroups(f"{SETTING} is not JSON: {error}") from None
    if not isinstance(pairs, _Pairs) or not pairs:
        raise InvalidIndexGroups(
            f'{SETTING} must be a JSON object of patterns to Redis URLs, {{"*": "redis://..."}}'
        )
    groups = []
    for pattern, url in pairs:
        if not pattern or not isinstance(url, str):
            raise InvalidIndexGroups(f"{SETTING}: {pattern!r} needs a Redis URL as a string")
        try:
            redis_urls.check(url)
        except redis_urls.InvalidRedisUrl as error:
            raise InvalidIndexGroups(f"{SETTING}: group {pattern!r}: {error}") from None
        groups.append(IndexGroup(pattern, url))
    patterns = [group.pattern for group in groups]
    if DEFAULT_PATTERN not in patterns:
        raise InvalidIndexGroups(
            f'{SETTING} has no default group: end it with "*": "<Redis URL>" (the group of '
            "every model no other pattern matches)"
        )
    if patterns[-1] != DEFAULT_PATTERN:
        after = patterns[patterns.index(DEFAULT_PATTERN) + 1 :]
        raise InvalidIndexGroups(
            f'{SETTING}: the default group "*" must come last: {after} after it could never match'
        )
    for index, group in enumerate(groups):
        for other in groups[:index]:
            if _same_database(group.url, other.url):
                raise InvalidIndexGroups(
                    f"{SETTING}: groups {other.pattern!r} and {group.pattern!r} name the same "
                    f"Redis database ({redis_urls.shown(group.url)}); give each its own primary, "
                    "or widen one pattern"
                )
    return tuple(groups)


class _Pairs(list):
    """A JSON object's (key, value) pairs in their order (a JSON array reads as a list)."""


def _refuse_repeats(pairs: list[tuple[str, Any]]) -> _Pairs:
    seen = set()
    for pattern, _ in pairs:
        if pattern in seen:
            raise InvalidIndexGroups(f"{SETTING} names the pattern {pattern!r} twice")
        seen.add(pattern)
    return _Pairs(pairs)


def _same_database(one: str, other: str) -> bool:
    return _database(one) == _database(other)


@lru_cache(maxsize=64)
def _database(url: str) -> tuple[Any, ...]:
    """What names one Redis database in `url` (read once per URL: the decision path asks)."""
    sentinel = redis_urls.parse_sentinel(url)
    if sentinel is not None:
        return ("sentinel", sentinel.master, sentinel.db)
    kwargs = redis.connection.parse_url(url)
    return (kwargs.get("host") or kwargs.get("path"), kwargs.get("port", 6379), kwargs.get("db", 0))


@cache
def index_groups() -> tuple[IndexGroup, ...]:
    """The configured groups in their order, the default last."""
    return parse(knob("INDEX_GROUPS"), settings.INDEX_REDIS_URL)


@lru_cache(maxsize=4096)
def group_of(model: str) -> IndexGroup:
    """The group holding `model`'s index: the first whose pattern matches."""
    return next(group for group in index_groups() if group.matches(model))


def group_of_pod(pod: str, model: str | None) -> IndexGroup:
    """The group holding `pod`: its registered `model`'s, else (a pod no engine registers)
    the first whose index still holds it, else the default."""
    if model is not None:
        return group_of(model)
    groups = index_groups()
    if len(groups) > 1:
        for group in groups:
            if group.client().hexists(keys.POD_MODELS_KEY, pod):
                return group
    return groups[-1]


def group_named(pattern: str) -> IndexGroup:
    """The group of that pattern; InvalidIndexGroups naming the configured ones otherwise."""
    for group in index_groups():
        if group.pattern == pattern:
            return group
    names = [group.pattern for group in index_groups()]
    raise InvalidIndexGroups(f"no index group {pattern!r}; {SETTING} has {names}")


@receiver(setting_changed)
def _reset(**kwargs: Any) -> None:
    if kwargs["setting"] in ("KVADMIN", "INDEX_REDIS_URL", "REDIS_URL"):
        index_groups.cache_clear()
        group_of.cache_clear()


# Start-up checks --------------------------------------------------------------------------


def ambiguous_models(groups: tuple[IndexGroup, ...], models: Iterable[str]) -> list[str]:
    """A message per model two named (non-default) patterns match."""
    found = []
    for model in sorted(set(models)):
        named = [g.pattern for g in groups if g.pattern != DEFAULT_PATTERN and g.matches(model)]
        if len(named) > 1:
            found.append(
                f"{SETTING}: the model {model!r} matches {named}; the first would win. Make the "
                "patterns exclusive so each model has one group"
            )
    return found


def primary_problem(group: IndexGroup) -> str | None:
    """Why `group`'s Redis cannot hold its index, None when it can: it must answer, be a
    primary (a replica refuses writes) and not be a Redis Cluster node (kthena's router reads
    one server, and cluster nodes answer MOVED to most keys)."""
    client = redis_urls.client(
        group.url, socket_timeout=2, socket_connect_timeout=2, retry=Retry(NoBackoff(), 0)
    )
    try:
        if int(client.info("cluster").get("cluster_enabled", 0)):
            return (
                f"index group {group.shown} is a Redis Cluster node: give each group a "
                "stock Redis primary (kthena's router reads one server, DB 0)"
            )
        role = client.execute_command("ROLE")[0]
        role = role.decode() if isinstance(role, bytes) else role
        if role != "master":
            return (
                f"index group {group.shown} is a read-only replica (ROLE: {role}), not a "
                "primary: name the primary (or its Sentinels with redis+sentinel://)"
            )
    except redis.RedisError as error:
        return f"index group {group.shown} does not answer: {error}"
    finally:
        client.close()
    return None


def setting_problems(models: Iterable[str]) -> list[str]:
    """What is wrong with the setting itself for `models` (the registered ones), without
    asking any Redis."""
    try:
        groups = index_groups()
    except InvalidIndexGroups as error:
        return [str(error)]
    return ambiguous_models(groups, models)


def primary_problems() -> list[str]:
    """What is wrong with the groups' Redis servers (each asked; the setting read first)."""
    try:
        groups = index_groups()
    except InvalidIndexGroups as error:
        return [str(error)]
    return [problem for group in groups if (problem := primary_problem(group))]


def startup_problems(models: Iterable[str]) -> list[str]:
    """Every reason the configured groups cannot serve `models` (the registered ones)."""
    return setting_problems(models) or primary_problems()
