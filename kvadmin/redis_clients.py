"""Redis clients of the web and worker processes, one pool per role per process."""

from functools import cache

import redis
from django.conf import settings


@cache
def index_client() -> redis.Redis:
    """The kthena-compatible index (and kvadmin's bookkeeping beside it), text responses."""
    return redis.Redis.from_url(settings.INDEX_REDIS_URL, decode_responses=True)


@cache
def index_bytes_client() -> redis.Redis:
    """The same database with raw bytes responses, for binary payloads."""
    return redis.Redis.from_url(settings.INDEX_REDIS_URL)
