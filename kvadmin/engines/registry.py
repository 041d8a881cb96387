"""Registry change notifications: readers reload the engine list when the version moves."""

from kvadmin.redis_clients import index_client
from scoring import keys

REGISTRY_VERSION_KEY = keys.REGISTRY_VERSION_KEY


def bump_registry_version() -> int:
    return int(index_client().incr(REGISTRY_VERSION_KEY))


def registry_version() -> int:
    return int(index_client().get(REGISTRY_VERSION_KEY) or 0)
