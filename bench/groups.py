"""Index groups (issue 35, part 4): ingest blocks/s with 3 groups against 1, in the same run,
on 3 local Redis primaries, and the memory each group's primary holds.

bench/ingest.py's recorded stream (8 simulated vLLM engines), its engines serving 3 models in
turn. One ingest process as a Celery worker runs it (`kvadmin.ingest.runner.run_loops`: one
IngestLoop per group, each on a thread with its group's primary) applies it, sent as fast as
the publishers go; the clock stops when every stream's last seq is visible. Rounds alternate,
1 group (every model on primary 0) then 3 groups (model i on primary i), each on emptied
primaries, and the ratio is of the medians.

Run: .venv/bin/python bench/groups.py [--requests N] [--rounds R]
"""

import argparse
import multiprocessing
import os
import sys
import time
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import redis

from bench.ingest import ENCODING, last_seqs, record, stored_blocks, wait_connected
from kvadmin.fleet.publisher import Publisher
from kvadmin.fleet.wire import encode_batch
from kvadmin.index.streams import StreamId
from kvadmin.index.writer import Applier
from kvadmin.ingest.streams import StreamSpec
from kvadmin.redis_server import RedisServer
from scoring.keys import block_key

MODELS = ("bench/model-a", "bench/model-b", "bench/model-c")


def spec(n: int, publisher: Publisher) -> StreamSpec:
    return StreamSpec(
        StreamId(f"vllm-{n}.bench", 0), MODELS[n % len(MODELS)], "vllm", publisher.endpoint,
        publisher.replay_endpoint, b"", 16,
    )  # fmt: skip


def run_loops(by_url: dict[str, list[StreamSpec]], stop: "multiprocessing.Event") -> None:
    """The ingest process: a loop per group, as `runner.build_loops` builds them."""
    from kvadmin.ingest.reader import IngestLoop
    from kvadmin.ingest.runner import run_loops as start

    loops = [
        IngestLoop(
            Applier(redis.Redis.from_url(url, decode_responses=True)),
            lambda specs=specs: specs,
            lambda: 0,
            worker_id="bench",
        )
        for url, specs in by_url.items()
    ]
    threads = start(loops)
    stop.wait()
    for loop in loops:
        loop.stop()
    for thread in threads:
        thread.join()


def redis_cpu(url: str) -> float:
    with redis.Redis.from_url(url) as client:
        info = client.info("cpu")
    return info["used_cpu_user"] + info["used_cpu_sys"]


def one_round(urls: list[str], groups: int, payloads: list[list[bytes]]) -> tuple[float, float]:
    """Seconds until the recorded stream is visible, with the models on `groups` primaries,
    and the CPU seconds the busiest primary spent meanwhile."""
    publishers = [Publisher(encoding=ENCODING, buffer_steps=1_000_000) for _ in payloads]
    specs = [spec(n, p) for n, p in enumerate(publishers)]
    by_url: dict[str, list[StreamSpec]] = {}
    for s in specs:
        by_url.setdefault(urls[MODELS.index(s.model) % groups], []).append(s)
    clients = {url: redis.Redis.from_url(url, decode_responses=True) for url in by_url}
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    process = context.Process(target=run_loops, args=(by_url, stop))
    process.start()
    try:
        for url, mine in by_url.items():
            wait_connected(clients[url], mine, [publishers[specs.index(s)] for s in mine])
        finals = {
            url: [len(payloads[specs.index(s)]) - 1 for s in mine] for url, mine in by_url.items()
        }
        cpu = {url: redis_cpu(url) for url in by_url}
        started = time.perf_counter()
        for i in range(max(len(p) for p in payloads)):
            for publisher, batches in zip(publishers, payloads, strict=True):
                if i < len(batches):
                    publisher.publish_payload(batches[i])
        while any(last_seqs(clients[url], mine) != finals[url] for url, mine in by_url.items()):
            time.sleep(0.005)
        seconds = time.perf_counter() - started
        return seconds, max(redis_cpu(url) - before for url, before in cpu.items())
    finally:
        stop.set()
        process.join(timeout=30)
        for publisher in publishers:
            publisher.close()
        for client in clients.values():
            client.close()


def memory(url: str) -> tuple[int, int]:
    """(used_memory bytes, block ownerships) of one primary."""
    client = redis.Redis.from_url(url, decode_responses=True)
    owners = 0
    for model in MODELS:
        for key in client.scan_iter(match=f"{block_key(model, 0)[:-1]}*", count=1000):
            owners += client.hlen(key)
    used = int(client.info("memory")["used_memory"])
    client.close()
    return used, owners


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=3000, help="prompts served per engine")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each layout")
    args = parser.parse_args()
    streams = record(args.requests)
    blocks = stored_blocks(streams)
    payloads = [[encode_batch(ENCODING, events, ts=1.0) for events in s] for s in streams]
    print(f"recorded: {len(streams)} engines over {len(MODELS)} models, {blocks:,} stored blocks")
    servers = [RedisServer().start() for _ in MODELS]
    urls = [server.url for server in servers]
    try:
        empty = [memory(url)[0] for url in urls]
        seconds: dict[int, list[float]] = {1: [], 3: []}
        busiest: dict[int, list[float]] = {1: [], 3: []}
        held: list[tuple[int, int]] = []
        for _ in range(args.rounds):
            for groups in (1, 3):
                for url in urls:
                    redis.Redis.from_url(url).flushdb()
                took, cpu = one_round(urls, groups, payloads)
                seconds[groups].append(took)
                busiest[groups].append(cpu)
                if groups == 3:
                    held = [memory(url) for url in urls]
        rates = {groups: blocks / median(runs) for groups, runs in seconds.items()}
        for groups, runs in seconds.items():
            listed = ", ".join(f"{blocks / s:,.0f}" for s in runs)
            print(f"{groups} group(s): {rates[groups]:>9,.0f} blocks/s (median; rounds {listed})")
        print(f"ratio 3 groups / 1 group: {rates[3] / rates[1]:.2f}")
        per_block = {groups: median(cpu) / blocks * 1e6 for groups, cpu in busiest.items()}
        print(f"Redis CPU of the busiest primary per stored block: 1 group "
              f"{per_block[1]:.1f} us, 3 groups {per_block[3]:.1f} us "
              f"(ratio {per_block[1] / per_block[3]:.2f})")  # fmt: skip
        for n, ((used, owners), base) in enumerate(zip(held, empty, strict=True)):
            per = (used - base) / owners if owners else 0.0
            print(f"group {n} ({MODELS[n]}): {(used - base) / 2**20:.1f} MiB over the empty "
                  f"server, {owners:,} ownerships, {per:.0f} B each")  # fmt: skip
        print(f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    finally:
        for server in servers:
            server.stop()


if __name__ == "__main__":
    main()
