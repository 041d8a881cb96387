"""Routing quality (issue 5, the product's headline figure): the same shared-prefix workload
on the same simulated fleet, routed three ways:

- random: the baseline, no cache awareness;
- kvadmin unweighted: longest cached prefix, every tier worth 1.0 (kthena without tiers);
- kvadmin tier-weighted: longest cached prefix weighted by tier (GPU 1.0, CPU 0.8, ...).

Each routing gets a fresh fleet (2 vLLM pods with a CPU offload tier, 2 SGLang pods with
pinned-CPU and disk tiers) and an empty index. The pods' KV events go over real ZMQ to an
ingest loop writing Redis; kvadmin routes with the same one-round-trip index read and
tie-break as `/api/v1/score`; requests go over HTTP to the pods, whose responses report the
real cached tokens per tier. Printed: hit rate by tier, prefill tokens saved, load spread
(busiest pod's requests over the mean), and how well kvadmin predicted each hit.

Run: .venv/bin/python bench/routing_quality.py [--requests N]
"""

import argparse
import socket
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import redis

from kvadmin.fleet.fleet import Fleet
from kvadmin.fleet.pod import PodConfig
from kvadmin.fleet.traffic import (
    FunctionRouter,
    PodEndpoint,
    RandomRouter,
    Router,
    TrafficGenerator,
    TrafficSummary,
)
from kvadmin.fleet.workload import Workload
from kvadmin.ingest.reader import IngestLoop
from kvadmin.ingest.streams import StreamId, StreamSpec
from kvadmin.redis_server import RedisServer
from scoring.choice import choose
from scoring.index import score_request
from scoring.weights import TierWeights

MODEL = "Qwen/Qwen3-8B"
UNWEIGHTED = TierWeights({"gpu": 1.0, "cpu": 1.0, "cpu_pinned": 1.0}, fallback=1.0)
WEIGHTED = TierWeights({"disk": 0.5}, fallback=1.0)  # kthena's defaults; disk slower than CPU


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def fleet_configs() -> list[PodConfig]:
    shapes = [
        ("vllm-0.default", "vllm", {"cpu_blocks": 1024}),
        ("vllm-1.default", "vllm", {"cpu_blocks": 1024}),
        ("sglang-0.default", "sglang", {"cpu_blocks": 512, "disk_blocks": 1024}),
        ("sglang-1.default", "sglang", {"cpu_blocks": 512, "disk_blocks": 1024}),
    ]
    return [
        PodConfig(
            name=name,
            kind=kind,
            model=MODEL,
            events_port=_free_port(),
            replay_port=_free_port(),
            http_port=_free_port(),
            gpu_blocks=384,
            **tiers,
        )  # fmt: skip
        for name, kind, tiers in shapes
    ]


CHANGED_BY_WEIGHTS = [0]
"""Decisions of the tier-weighted run whose pod the unweighted scoring would not have chosen."""


def kvadmin_router(client: redis.Redis, weights: TierWeights) -> Router:
    def route(model, token_ids, pods: list[PodEndpoint]) -> tuple[PodEndpoint, int]:
        names = {pod.name: pod for pod in pods}
        result = score_request(client, model, token_ids, set(names), {}, weights)
        first = _first_block(token_ids)
        chosen, _ = choose(result.scores, names, first)
        if weights is WEIGHTED:
            flat = score_request(client, model, token_ids, set(names), {}, UNWEIGHTED)
            CHANGED_BY_WEIGHTS[0] += choose(flat.scores, names, first)[0] != chosen
        matched = next((p.matched_blocks for p in result.pods if p.pod == chosen), 0)
        return names[chosen], min(matched, (len(token_ids) - 1) // 16) * 16

    return FunctionRouter(route)


def _first_block(token_ids) -> int:
    from scoring.hashing import block_hashes

    return (block_hashes(token_ids, 16, 1) or [0])[0]


def run(routing: str, requests: int, redis_url: str) -> TrafficSummary:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    client.flushdb()
    configs = fleet_configs()
    with Fleet(configs) as fleet:
        specs = [
            StreamSpec(
                StreamId(c.name, 0), MODEL, c.kind, c.events_endpoint, c.replay_endpoint, b"", 16
            )  # fmt: skip
            for c in configs
        ]
        loop = IngestLoop(client, lambda: specs, lambda: 0, worker_id=f"bench-{routing}")
        thread = threading.Thread(target=loop.run)
        thread.start()
        try:
            fleet.wait_for_subscribers()
            router: Router = {
                "random": lambda: RandomRouter(seed=3),
                "kvadmin unweighted": lambda: kvadmin_router(client, UNWEIGHTED),
                "kvadmin tier-weighted": lambda: kvadmin_router(client, WEIGHTED),
            }[routing]()
            traffic = TrafficGenerator(fleet.endpoints(), router, Workload(MODEL, seed=11))
            started = time.perf_counter()
            summary = traffic.run(requests=requests)
            traffic.close()
            print(f"  ({routing}: {requests} requests in {time.perf_counter() - started:.1f} s)")
            return summary
        finally:
            loop.stop()
            thread.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=1500)
    args = parser.parse_args()
    results = {}
    with RedisServer() as server:
        for routing in ("random", "kvadmin unweighted", "kvadmin tier-weighted"):
            results[routing] = run(routing, args.requests, server.url)
    media = sorted({m for s in results.values() for m in s.cached_by_medium})
    header = f"{'routing':<24}{'hit rate':>9}" + "".join(f"{m:>12}" for m in media)
    print(header + f"{'prefill saved':>15}{'load spread':>13}{'exact pred.':>13}")
    for routing, summary in results.items():
        by_medium = summary.hit_rate_by_medium
        exact = (
            f"{summary.exact_predictions / summary.predictions:.0%}" if summary.predictions else "-"
        )
        print(
            f"{routing:<24}{summary.hit_rate:>9.1%}"
            + "".join(f"{by_medium.get(m, 0.0):>12.1%}" for m in media)
            + f"{summary.cached_tokens:>15,}{summary.load_spread:>13.2f}{exact:>13}"
        )
    print(f"tier weights chose another pod than unweighted scoring in {CHANGED_BY_WEIGHTS[0]} "
          f"of {args.requests} decisions")  # fmt: skip
    base = results["random"].cached_tokens or 1
    for routing in ("kvadmin unweighted", "kvadmin tier-weighted"):
        print(f"{routing}: {results[routing].cached_tokens / base:.2f}x the prefill tokens "
              f"saved by random routing")  # fmt: skip


if __name__ == "__main__":
    main()
