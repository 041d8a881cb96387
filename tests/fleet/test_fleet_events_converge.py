"""End to end without Redis: HTTP traffic through a mixed fleet, every pod's events read by real
SUB sockets and folded into an index, which then equals every pod's true cache contents, across
evictions, offloads, a cache reset and a restart."""

from collections.abc import Iterator

import pytest
import zmq

from kvadmin.fleet.fleet import Fleet
from kvadmin.fleet.traffic import RandomRouter, TrafficGenerator
from kvadmin.fleet.workload import Workload, WorkloadShape
from kvadmin.ingest.decode import decode_batch, split_frames
from tests.fleet.conftest import StartFleet, local_config
from tests.fleet.folded_index import FoldedIndex
from tests.waiting import wait_until


class Listener:
    """One SUB per pod, folding what arrives; a seq going backwards is a restart."""

    def __init__(self, fleet: Fleet) -> None:
        self.sockets: dict[str, zmq.Socket] = {}
        self.indexes = {pod.name: FoldedIndex() for pod in fleet.pods}
        self.last_seq = {pod.name: -1 for pod in fleet.pods}
        for pod in fleet.pods:
            sub = zmq.Context.instance().socket(zmq.SUB)
            sub.setsockopt(zmq.LINGER, 0)
            sub.setsockopt(zmq.SUBSCRIBE, b"")
            sub.connect(pod.publishers[0].endpoint)
            self.sockets[pod.name] = sub
        fleet.wait_for_subscribers()

    def drain(self) -> None:
        for name, sub in self.sockets.items():
            while sub.poll(0):
                _topic, seq, payload = split_frames(sub.recv_multipart())
                assert seq == self.last_seq[name] + 1 or seq == 0
                if seq <= self.last_seq[name]:
                    self.indexes[name].clear()
                self.last_seq[name] = seq
                for event in decode_batch(payload).events:
                    self.indexes[name].apply(event)

    def matches(self, fleet: Fleet) -> bool:
        self.drain()
        return all(self.indexes[pod.name].contents() == pod.contents() for pod in fleet.pods)

    def close(self) -> None:
        for sub in self.sockets.values():
            sub.close()


@pytest.fixture
def fleet(start_fleet: StartFleet) -> Fleet:
    """Three simulated pods, one per event encoding (vLLM map, vLLM array, SGLang)."""
    return start_fleet(
        local_config("vllm-0.default", gpu_blocks=48, cpu_blocks=64),
        local_config("vllm-1.default", encoding="vllm-array", gpu_blocks=48, bytes_hashes=True),
        local_config("sglang-0.default", "sglang", gpu_blocks=48, cpu_blocks=32, disk_blocks=64),
    )


@pytest.fixture
def listener(fleet: Fleet) -> Iterator[Listener]:
    """Subscribers to every pod of the fleet, rebuilding each pod's cache from its events."""
    listener = Listener(fleet)
    yield listener
    listener.close()


def test_the_folded_events_equal_every_pods_cache(fleet: Fleet, listener: Listener) -> None:
    shape = WorkloadShape(groups=3, users_per_group=4, system_prompt_words=(150, 300))
    traffic = TrafficGenerator(
        fleet.endpoints(), RandomRouter(seed=4), Workload(fleet.pods[0].model, 4, shape)
    )
    for round_ in range(3):
        traffic.run(requests=40)
        fleet.flush()
        wait_until(lambda: listener.matches(fleet), what="the index to converge")
        if round_ == 0:
            fleet.pod("sglang-0.default").clear()
        elif round_ == 1:
            fleet.pod("vllm-0.default").restart()
    traffic.close()
    media = {medium for pod in fleet.pods for _, medium in pod.contents()}
    assert {"GPU", "CPU", "CPU_PINNED"} <= media
    assert traffic.summary.cached_tokens > 0
