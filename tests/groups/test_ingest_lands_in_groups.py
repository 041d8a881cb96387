"""A worker runs one ingest loop per index group: each model's events land in its group's
primary, with their stream status and leases, and nowhere else."""

import pytest
import redis

from kvadmin.index import status
from kvadmin.index.streams import StreamId
from scoring.keys import POD_MODELS_KEY, block_key, stream_lease_key
from tests.groups.conftest import DEFAULT_POD, GROUPED_POD
from tests.groups.ingested import publisher, register, worker
from tests.index import MODEL, OTHER_MODEL, std
from tests.ingest.blocks import stored
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_each_models_blocks_land_in_its_group(
    grouped: redis.Redis, redis_client: redis.Redis
) -> None:
    with publisher() as qwen, publisher() as llama:
        register(GROUPED_POD, MODEL, qwen)
        register(DEFAULT_POD, OTHER_MODEL, llama)
        engines = {GROUPED_POD: (MODEL, qwen), DEFAULT_POD: (OTHER_MODEL, llama)}
        with worker(engines, "groups") as loops:
            assert len(loops) == 2
            qwen_seq = qwen.publish([stored(1, 2)])
            llama_seq = llama.publish([stored(3)])
            wait_until(
                lambda: status.last_seq(grouped, StreamId(GROUPED_POD, 0)) >= qwen_seq,
                what="the Qwen batch applied in its group",
            )
            wait_until(
                lambda: status.last_seq(redis_client, StreamId(DEFAULT_POD, 0)) >= llama_seq,
                what="the Llama batch applied on REDIS_URL",
            )
            assert grouped.exists(stream_lease_key(GROUPED_POD, "0"))
            assert not redis_client.exists(stream_lease_key(GROUPED_POD, "0"))
    assert grouped.hgetall(block_key(MODEL, std(1))).keys() == {GROUPED_POD}
    assert not redis_client.exists(block_key(MODEL, std(1)), block_key(MODEL, std(2)))
    assert redis_client.hgetall(block_key(OTHER_MODEL, std(3))).keys() == {DEFAULT_POD}
    assert not grouped.exists(block_key(OTHER_MODEL, std(3)))
    assert grouped.hgetall(POD_MODELS_KEY) == {GROUPED_POD: MODEL}
    assert redis_client.hgetall(POD_MODELS_KEY) == {DEFAULT_POD: OTHER_MODEL}
