"""Cached blocks put into the index by the real applier, for pages that read what it records."""

import redis

from kvadmin.index.events import BlockStored, EventBatch
from kvadmin.index.writer import Applier
from tests.index import MODEL


def cache_blocks(client: redis.Redis, pod: str, media: list[str | None]) -> None:
    """The pod stores one block per medium in `media` (None: a pre-medium engine)."""
    applier = Applier(client)
    for seq, medium in enumerate(media):
        tokens = tuple(range(seq * 16, seq * 16 + 16))
        event = BlockStored((str(1000 + seq),), tokens, 16, medium)
        applier.apply_batch(pod, MODEL, "sglang", 0, seq, EventBatch(0.0, [event]), now=100)
