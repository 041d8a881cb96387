"""Registry change notifications: readers reload the engine list when the version moves."""

from kvadmin.redis_clients import index_client
from scoring import keys


def bump_registry_version() -> int:
    return int(index_client().incr(keys.REGISTRY_VERSION_KEY))


def registry_version() -> int:
    return int(index_client().get(keys.REGISTRY_VERSION_KEY) or 0)
