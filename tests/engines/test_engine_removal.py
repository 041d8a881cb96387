"""Removing an engine purges exactly its index entries."""

import pytest
from django.core.management import call_command

from kvadmin.engines.models import Engine
from kvadmin.ingest.apply import Applier
from kvadmin.ingest.events import BlockStored, EventBatch
from kvadmin.ingest.streams import StreamId, StreamSpec
from scoring.hashing import hash_block
from scoring.keys import block_key

pytestmark = pytest.mark.django_db(transaction=True)
MODEL = "m"


def _store(redis_client, pod: str, blocks: range) -> None:
    spec = StreamSpec(StreamId(pod, 0), MODEL, "vllm", "tcp://x:1", None, b"", 16)
    events = [
        BlockStored((str(1000 + n),), tuple(range(n * 16, n * 16 + 16)), 16, "GPU") for n in blocks
    ]
    Applier(redis_client).apply_batches(spec, [(0, EventBatch(ts=0.0, events=events))], now=1)


def test_it_purges_the_removed_pod_only(redis_client) -> None:
    for pod in ("a-0.default", "b-0.default"):
        Engine.objects.create(pod=pod, model=MODEL, events_endpoint="tcp://127.0.0.1:1")
        _store(redis_client, pod, range(3))
    call_command("engines", "remove", "--pod", "a-0.default")
    key = block_key(MODEL, hash_block(list(range(16))))
    assert redis_client.hgetall(key).keys() == {"b-0.default"}
    assert not Engine.objects.filter(pod="a-0.default").exists()
    assert not [k for k in redis_client.keys("*a-0.default*") if "stream" not in k]
