"""Index groups (issue 35, part 4): ingest blocks/s with 3 groups against 1, in the same run,
on 3 local Redis primaries, and the memory each group's primary holds.

bench/ingest.py's recorded stream (8 simulated vLLM engines), its engines serving 3 models in
turn. One ingest process as a Celery worker runs it (`kvadmin.ingest.runner.run_loops`: one
IngestLoop per group, each on a thread with its group's primary) applies it, sent as fast as
the publishers go; the clock stops when every stream's last seq is visible. Rounds alternate,
1 group (every model on primary 0) then 3 groups (model i on primary i), each on emptied
primaries, and the ratio is of the medians. Beside it, per stored block and as a share of a
core while a round ran: the CPU of the busiest primary (what bounds a primary with a core of
its own: docs/capacity.md 2), of every primary, of the ingest process and of the publishers. On
a machine with fewer cores than those processes the shares show that the machine, not a
primary, bounds the end-to-end rate; the busiest primary's CPU per block is the figure that
carries to production. Memory: each primary's used_memory over its empty server, in bytes and
per ownership.

Run: .venv/bin/python bench/groups.py [--requests N] [--rounds R]
"""

import argparse
import multiprocessing
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import redis

from bench.ingest import (
    ENCODING,
    last_seqs,
    process_cpu,
    record,
    stored_blocks,
    wait_connected,
)
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


@dataclass(frozen=True)
class Round:
    """One round: seconds until the stream is visible, and the CPU seconds spent meanwhile."""

    seconds: float
    primaries: list[float]
    """Each primary in use (Redis user + system)."""
    ingest: float
    """The ingest process, all its loops."""
    publishers: float
    """This process: the 8 publishers and the end-of-run check."""


def one_round(urls: list[str], groups: int, payloads: list[list[bytes]]) -> Round:
    """The recorded stream applied with the models on `groups` primaries."""
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
        before = Round(0.0, [redis_cpu(url) for url in by_url], process_cpu(process.pid),
                       time.process_time())  # fmt: skip
        started = time.perf_counter()
        for i in range(max(len(p) for p in payloads)):
            for publisher, batches in zip(publishers, payloads, strict=True):
                if i < len(batches):
                    publisher.publish_payload(batches[i])
        while any(last_seqs(clients[url], mine) != finals[url] for url, mine in by_url.items()):
            time.sleep(0.005)
        seconds = time.perf_counter() - started
        return Round(
            seconds,
            [redis_cpu(url) - cpu for url, cpu in zip(by_url, before.primaries, strict=True)],
            process_cpu(process.pid) - before.ingest,
            time.process_time() - before.publishers,
        )
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


def report(rounds: dict[int, list[Round]], blocks: int, engines: int) -> None:
    """Blocks/s of each layout and their same-run ratio; per stored block and as a share of a
    core, the CPU of the busiest primary, of every primary, of the ingest process and of the
    publishers (medians over the rounds)."""
    rates = {groups: blocks / median(r.seconds for r in runs) for groups, runs in rounds.items()}
    for groups, runs in rounds.items():
        listed = ", ".join(f"{blocks / r.seconds:,.0f}" for r in runs)
        print(f"{groups} group(s): {rates[groups]:>9,.0f} blocks/s (median; rounds {listed})")
    print(f"ratio 3 groups / 1 group: {rates[3] / rates[1]:.2f}")
    parts = {
        "busiest primary": lambda r: max(r.primaries),
        "all primaries": lambda r: sum(r.primaries),
        "ingest process": lambda r: r.ingest,
        "publishers": lambda r: r.publishers,
    }
    print("CPU per stored block (us) | share of a core while the round ran:")
    for name, cpu in parts.items():
        cells = [
            f"{groups} group(s) {median(cpu(r) for r in runs) / blocks * 1e6:5.1f} us | "
            f"{median(cpu(r) / r.seconds for r in runs):4.0%}"
            for groups, runs in rounds.items()
        ]
        print(f"  {name:<16} " + ";  ".join(cells))
    busiest = {groups: median(max(r.primaries) for r in runs) for groups, runs in rounds.items()}
    carried = max(sum(n % len(MODELS) == g for n in range(engines)) for g in range(len(MODELS)))
    print(f"busiest primary's Redis CPU, 1 group / 3 groups: {busiest[1] / busiest[3]:.2f} "
          f"(its streams: {engines} against {carried}, {engines / carried:.2f})")  # fmt: skip


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
        rounds: dict[int, list[Round]] = {1: [], 3: []}
        held: list[tuple[int, int]] = []
        load = os.getloadavg()[0]
        for _ in range(args.rounds):
            for groups in rounds:
                for url in urls:
                    redis.Redis.from_url(url).flushdb()
                rounds[groups].append(one_round(urls, groups, payloads))
                if groups == 3:
                    held = [memory(url) for url in urls]
        report(rounds, blocks, len(streams))
        for n, ((used, owners), base) in enumerate(zip(held, empty, strict=True)):
            grown = used - base
            per = grown / owners if owners else 0.0
            print(f"group {n} ({MODELS[n]}): {grown:,} bytes ({grown / 2**20:.1f} MiB) over the "
                  f"empty server, {owners:,} ownerships, {per:.0f} B each")  # fmt: skip
        print(f"load average: {load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end, "
              f"on {os.cpu_count()} cores")  # fmt: skip
    finally:
        for server in servers:
            server.stop()


if __name__ == "__main__":
    main()
