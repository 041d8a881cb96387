"""Garbage collection runs in every index group; a group counts as registered only the pods of
the models it holds, so a pod left in a group its model moved away from is collected there."""

import time

import pytest
import redis

from kvadmin.index.events import BlockStored
from kvadmin.ingest.tasks import collect_garbage
from scoring.keys import POD_MODELS_KEY, block_key
from tests.groups.conftest import GROUPED_POD
from tests.index import MODEL, IngestedIndex, block_tokens, engine_hash, std

pytestmark = pytest.mark.django_db(transaction=True)


def _stored(*blocks: int) -> BlockStored:
    tokens = [t for n in blocks for t in block_tokens(n)]
    return BlockStored(
        block_hashes=[engine_hash(n) for n in blocks], token_ids=tokens, block_size=16
    )


def test_gc_collects_unregistered_pods_and_leftovers_of_a_move_in_each_group(
    two_models, grouped: redis.Redis, redis_client: redis.Redis
) -> None:
    now = time.time()  # fresh: only unregistered pods and leftovers go
    IngestedIndex(grouped).send(GROUPED_POD, _stored(1), model=MODEL, at=now)
    IngestedIndex(grouped).send("gone.default", _stored(2), model=MODEL, at=now)
    IngestedIndex(redis_client).send(GROUPED_POD, _stored(3), model=MODEL, at=now)  # pre-move
    collect_garbage(force=True)
    assert grouped.hgetall(POD_MODELS_KEY) == {GROUPED_POD: MODEL}
    assert grouped.hgetall(block_key(MODEL, std(1))).keys() == {GROUPED_POD}
    assert not grouped.exists(block_key(MODEL, std(2)))
    assert not redis_client.hexists(POD_MODELS_KEY, GROUPED_POD)
    assert not redis_client.exists(block_key(MODEL, std(3)))
