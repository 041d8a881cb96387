"""The traffic generator routes each request, sends it to the chosen pod over HTTP and records
predicted versus actual cached tokens."""

from collections.abc import Sequence

from kvadmin.fleet.fleet import Fleet
from kvadmin.fleet.tokenizer import Message, encode_chat
from kvadmin.fleet.traffic import (
    PodEndpoint,
    RandomRouter,
    RequestRecord,
    TrafficGenerator,
)
from kvadmin.fleet.workload import Workload, WorkloadShape
from kvadmin.redis_server import free_port
from tests.fleet.conftest import StartFleet, local_config


def _two_pods(start_fleet: StartFleet) -> Fleet:
    return start_fleet(
        local_config(gpu_blocks=64, cpu_blocks=64),
        local_config("sglang-0.default", "sglang", gpu_blocks=64, cpu_blocks=32, disk_blocks=64),
    )


class OracleRouter:
    """Knows each pod's cache exactly: picks the longest hit and predicts it."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet

    def choose(
        self, model: str, token_ids: Sequence[int], pods: Sequence[PodEndpoint], request_id: str
    ) -> tuple[PodEndpoint, int | None]:
        hits = [sum(self.fleet.pod(p.name).lookup(token_ids).values()) for p in pods]
        best = max(range(len(pods)), key=lambda i: (hits[i], -i))
        return pods[best], hits[best]


def test_an_exact_router_predicts_every_hit(start_fleet: StartFleet) -> None:
    fleet = _two_pods(start_fleet)
    traffic = TrafficGenerator(
        fleet.endpoints(), OracleRouter(fleet), Workload(fleet.pods[0].model)
    )
    summary = traffic.run(requests=60)
    assert (summary.requests, summary.failed) == (60, 0)
    assert summary.predictions == summary.exact_predictions == 60
    assert summary.cached_tokens > 0
    assert sum(summary.cached_by_medium.values()) == summary.cached_tokens
    assert all(
        sum(r.cached_by_medium.values()) == r.cached_tokens and r.cached_tokens % 16 == 0
        for r in traffic.records
    )
    traffic.close()


def test_random_routing_spreads_load_and_makes_no_predictions(start_fleet: StartFleet) -> None:
    fleet = _two_pods(start_fleet)
    seen: list[RequestRecord] = []
    traffic = TrafficGenerator(
        fleet.endpoints(),
        RandomRouter(seed=1),
        Workload(fleet.pods[0].model),
        on_record=seen.append,
    )
    summary = traffic.run(requests=40)
    assert len(seen) == 40 and summary.predictions == 0
    assert set(summary.requests_by_pod) == {"vllm-0.default", "sglang-0.default"}
    assert 1.0 <= summary.load_spread < 2.0
    assert 0.0 < summary.hit_rate < 1.0
    assert "hit rate" in summary.format()
    assert summary.as_dict()["prefill_tokens_saved"] == summary.cached_tokens
    traffic.close()


class FirstPod:
    """A router that sends every request to the first pod, keeping the token ids it got."""

    def __init__(self) -> None:
        self.calls: list[list[int]] = []

    def choose(
        self, model: str, token_ids: Sequence[int], pods: Sequence[PodEndpoint], request_id: str
    ) -> tuple[PodEndpoint, int | None]:
        self.calls.append(list(token_ids))
        return pods[0], 0


def test_a_router_gets_the_token_ids_of_the_templated_prompt(start_fleet: StartFleet) -> None:
    fleet = start_fleet(local_config())
    router = FirstPod()
    calls = router.calls

    shape = WorkloadShape(cold_fraction=0)
    traffic = TrafficGenerator(fleet.endpoints(), router, Workload(fleet.pods[0].model, 9, shape))
    record = traffic.step()
    same = Workload(fleet.pods[0].model, 9, shape).next_request()
    assert calls == [encode_chat([Message(m["role"], m["content"]) for m in same.body["messages"]])]
    assert record.prompt_tokens == len(calls[0])
    assert record.predicted_cached_tokens == 0
    traffic.close()


def test_a_pod_that_does_not_answer_counts_as_failed_and_traffic_goes_on(
    start_fleet: StartFleet,
) -> None:
    fleet = start_fleet(local_config())
    gone = PodEndpoint("vllm-9.default", f"http://127.0.0.1:{free_port()}", "vllm", "m")
    traffic = TrafficGenerator(
        [gone, *fleet.endpoints()], RandomRouter(seed=2), Workload(fleet.pods[0].model)
    )
    summary = traffic.run(requests=20)
    assert summary.failed > 0 and summary.requests > 0
    assert summary.failed + summary.requests == 20
    assert summary.requests_by_pod["vllm-9.default"] == 0
    assert summary.load_spread == 2.0
    traffic.close()
