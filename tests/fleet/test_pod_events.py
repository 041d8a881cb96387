"""What a pod publishes, read by a real ZMQ SUB socket and decoded by kvadmin's decoder, is
exactly the cache model's event sequence: one batch per served request, seq counting up."""

from collections.abc import Iterator

import pytest
import zmq

from kvadmin.fleet.pod import PodConfig, SimPod
from kvadmin.fleet.wire import Encoding
from kvadmin.index.events import AllBlocksCleared, EventBatch
from kvadmin.ingest.decode import decode_batch, split_frames
from tests.fleet.conftest import local_config

PROMPTS = [list(range(i * 7, i * 7 + 16 * (1 + i % 4) + 5)) for i in range(12)]


@pytest.fixture
def open_pod() -> Iterator:
    """Open simulated pods of the given configs; every pod opened is closed after the test."""
    pods: list[SimPod] = []

    def open_(config: PodConfig) -> SimPod:
        pods.append(SimPod(config))
        return pods[-1]

    yield open_
    for pod in pods:
        pod.close()


def subscribe(pod: SimPod, rank: int = 0) -> zmq.Socket:
    sub = zmq.Context.instance().socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    sub.setsockopt(zmq.RCVTIMEO, 5000)
    sub.setsockopt(zmq.SUBSCRIBE, pod.config.topic.encode())
    sub.connect(pod.publishers[rank].endpoint)
    return sub


def receive(sub: zmq.Socket, count: int) -> list[tuple[bytes, int, EventBatch]]:
    """(topic, seq, batch) of the next `count` messages, read as the ingest reader reads them."""
    messages = [split_frames(sub.recv_multipart()) for _ in range(count)]
    return [(topic, seq, decode_batch(payload)) for topic, seq, payload in messages]


@pytest.mark.parametrize(
    ("kind", "encoding", "tiers"),
    [
        ("vllm", Encoding.VLLM_MAP, {"cpu_blocks": 6}),
        ("vllm", Encoding.VLLM_ARRAY, {"cpu_blocks": 6, "bytes_hashes": True}),
        ("sglang", Encoding.SGLANG_ARRAY, {"cpu_blocks": 4, "disk_blocks": 4}),
        ("sglang", Encoding.SGLANG_MAP, {"cpu_blocks": 4, "disk_blocks": 4}),
    ],
)
def test_decoded_batches_equal_the_cache_models_events(
    open_pod, kind: str, encoding: Encoding, tiers: dict
) -> None:
    pod = open_pod(
        local_config(
            f"{kind}-0.default", kind, encoding=encoding, gpu_blocks=5, topic="kv", **tiers
        )
    )
    sub = subscribe(pod)
    pod.wait_for_subscribers()
    expected = [pod.serve(prompt)[1].events for prompt in PROMPTS]
    expected = [events for events in expected if events]
    pod.clear()
    expected.append([AllBlocksCleared()])
    batches = receive(sub, len(expected))
    sub.close()
    assert [seq for _topic, seq, _batch in batches] == list(range(len(expected)))
    assert [topic for topic, _seq, _batch in batches] == [b"kv"] * len(expected)
    assert [batch.events for _topic, _seq, batch in batches] == expected
    assert all(batch.skipped == {} for _topic, _seq, batch in batches)
    media = {e.medium for events in expected for e in events if hasattr(e, "medium")}
    assert len(media) >= 2, "the prompts should have pushed blocks into a lower tier"


def test_data_parallel_ranks_publish_on_offset_ports_each_with_its_own_seq(open_pod) -> None:
    pod = open_pod(local_config(dp_size=2, replay_port=None))
    assert pod.publishers[1].endpoint.endswith(f":{pod.config.events_port + 1}")
    subs = [subscribe(pod, rank) for rank in (0, 1)]
    pod.wait_for_subscribers()
    served = [pod.serve(prompt) for prompt in PROMPTS[:4]]
    assert [rank for rank, _ in served] == [0, 1, 0, 1]
    for rank, sub in enumerate(subs):
        batches = receive(sub, 2)
        sub.close()
        assert [seq for _topic, seq, _batch in batches] == [0, 1]
        assert [batch.rank for _topic, _seq, batch in batches] == [rank, rank]
        events = [batch.events for _topic, _seq, batch in batches]
        assert events == [r.events for k, r in served if k == rank]
