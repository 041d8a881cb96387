"""Ingest benchmark (issue 4): stored blocks per second, kvadmin against kthena's sidecar.

1. Records a realistic stream: 8 simulated vLLM engines (GPU tier with LRU eviction, CPU
   offload through placeholders) serve shared-prefix prompts that store 1 to 8 new blocks.
2. kvadmin end to end: the recorded batches go out over real ZMQ PUB sockets as fast as they
   can; ONE ingest process (the loop a Celery worker runs) applies them; the clock stops when
   every stream's last seq is visible in Redis. The CPU time Redis, the ingest process and
   the publishers spent meanwhile, per block, bounds what this machine's cores allow.
3. The same recorded stream, decoded and applied in this process: kvadmin's applier and the
   kthena-style baseline (per event one MULTI pipeline of SET, EXPIRE, HSET per block; one GET
   per removed hash), each on an empty index.
4. Lag: a steady 20,000 blocks/s through the ingest process; a reader polls the streams' last
   seq every millisecond and takes, per batch, the time from publishing to visible.

Run: .venv/bin/python bench/ingest.py [--requests N]

With `--against REF` (a git revision) it measures instead the applier in process, this checkout's
against REF's (exported with `git archive`), each in a process of its own and in alternating
rounds on one Redis, and prints the ratios: the check that a change of the writer costs no
throughput (issue 21's Lua split against the one script before it). Besides blocks/s it takes
the CPU time per block of Redis's script calls (commandstats) and of the applier's process,
which a busy machine disturbs less than the wall clock.
"""

import argparse
import multiprocessing
import os
import pickle
import random
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import quantiles

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import redis

from bench.baseline import KthenaBaseline
from kvadmin.fleet.cache import CacheModel, lower_tiers_for
from kvadmin.fleet.publisher import Publisher
from kvadmin.fleet.wire import Encoding, encode_batch
from kvadmin.index.events import BlockStored, Event
from kvadmin.index.streams import StreamId
from kvadmin.index.writer import Applier
from kvadmin.ingest.decode import decode_batch
from kvadmin.ingest.streams import StreamSpec
from kvadmin.redis_server import RedisServer
from scoring.keys import stream_status_key

ENGINES = 8
MODEL = "Qwen/Qwen3-8B"
ENCODING = Encoding.VLLM_MAP
LAG_BLOCKS_PER_SECOND = 20_000
LAG_SECONDS = 5.0


def record(requests_per_engine: int, seed: int = 1) -> list[list[list[Event]]]:
    """Per engine, the event lists of its batches (one batch per served prompt)."""
    rng = random.Random(seed)
    prefixes = [
        [rng.randrange(1, 150_000) for _ in range(16 * rng.randint(2, 16))] for _ in range(32)
    ]
    streams = []
    for _ in range(ENGINES):
        cache = CacheModel("vllm", 4096, lower_tiers_for("vllm", cpu_blocks=8192))
        batches = []
        for _ in range(requests_per_engine):
            new = [rng.randrange(1, 150_000) for _ in range(16 * rng.randint(1, 8))]
            events = cache.serve(rng.choice(prefixes) + new + [1]).events
            if events:
                batches.append(events)
        streams.append(batches)
    return streams


def stored_blocks(streams: list[list[list[Event]]]) -> int:
    return sum(
        len(event.block_hashes)
        for batches in streams
        for events in batches
        for event in events
        if isinstance(event, BlockStored)
    )


def spec(n: int, publisher: Publisher) -> StreamSpec:
    return StreamSpec(
        StreamId(f"vllm-{n}.bench", 0), MODEL, "vllm", publisher.endpoint,
        publisher.replay_endpoint, b"", 16,
    )  # fmt: skip


def run_loop(redis_url: str, specs: list[StreamSpec], stop: "multiprocessing.Event") -> None:
    """The ingest process: one IngestLoop, as in a Celery worker, until `stop` is set."""
    from kvadmin.ingest.reader import IngestLoop

    client = redis.Redis.from_url(redis_url, decode_responses=True)
    loop = IngestLoop(Applier(client), lambda: specs, lambda: 0, worker_id="bench")
    thread = threading.Thread(target=loop.run)
    thread.start()
    stop.wait()
    loop.stop()
    thread.join()


class IngestProcess:
    def __init__(self, redis_url: str, specs: list[StreamSpec]) -> None:
        context = multiprocessing.get_context("spawn")
        self.stop = context.Event()
        self.process = context.Process(target=run_loop, args=(redis_url, specs, self.stop))
        self.process.start()

    def close(self) -> None:
        self.stop.set()
        self.process.join(timeout=30)


def last_seqs(client: redis.Redis, specs: list[StreamSpec]) -> list[int]:
    pipe = client.pipeline(transaction=False)
    for s in specs:
        pipe.hget(stream_status_key(s.id.pod, s.id.rank), "last_seq")
    return [int(v) if v is not None else -1 for v in pipe.execute()]


def wait_connected(client: redis.Redis, specs: list[StreamSpec], publishers) -> None:
    deadline = time.monotonic() + 60
    while True:
        pipe = client.pipeline(transaction=False)
        for s in specs:
            pipe.hget(stream_status_key(s.id.pod, s.id.rank), "connected")
        if all(v == "1" for v in pipe.execute()):
            break
        if time.monotonic() > deadline:
            raise SystemExit("the ingest process did not connect")
        time.sleep(0.01)
    for publisher in publishers:
        publisher.wait_for_subscribers()


def process_cpu(pid: int) -> float:
    """CPU seconds (user and system) the process `pid` has spent so far."""
    stat = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Cpu:
    """CPU seconds (user + system) each party spent during a run."""

    redis: float
    ingest: float
    publishers: float
    """This process: the 8 publishers and the end-of-run check."""
    scripts: float
    """Of Redis's time, the script calls (Redis's commandstats of EVALSHA)..."""
    commands: float
    """...and the commands run by them (the commandstats of every other command; the
    ingest process's few other commands and this process's checks are about 0.1% of it)."""
    calls: int
    """How many commands those are."""

    @classmethod
    def now(cls, client: redis.Redis, ingest_pid: int) -> "Cpu":
        info = client.info("cpu")
        stats = client.info("commandstats")
        scripts = stats.pop("cmdstat_evalsha", {"usec": 0})["usec"] / 1e6
        for own in ("cmdstat_info", "cmdstat_flushdb"):
            stats.pop(own, None)
        return cls(
            info["used_cpu_user"] + info["used_cpu_sys"],
            process_cpu(ingest_pid),
            time.process_time(),
            scripts,
            sum(s["usec"] for s in stats.values()) / 1e6,
            sum(s["calls"] for s in stats.values()),
        )

    def __sub__(self, other: "Cpu") -> "Cpu":
        return Cpu(
            self.redis - other.redis,
            self.ingest - other.ingest,
            self.publishers - other.publishers,
            self.scripts - other.scripts,
            self.commands - other.commands,
            self.calls - other.calls,
        )


def end_to_end(url: str, streams: list[list[list[Event]]]) -> tuple[float, Cpu]:
    """kvadmin through ZMQ and the ingest process; returns seconds until all is visible and
    the CPU time spent meanwhile."""
    payloads = [[encode_batch(ENCODING, events, ts=1.0) for events in s] for s in streams]
    publishers = [Publisher(encoding=ENCODING, buffer_steps=1_000_000) for _ in streams]
    specs = [spec(n, p) for n, p in enumerate(publishers)]
    client = redis.Redis.from_url(url, decode_responses=True)
    ingest = IngestProcess(url, specs)
    try:
        wait_connected(client, specs, publishers)
        finals = [len(p) - 1 for p in payloads]
        cpu = Cpu.now(client, ingest.process.pid)
        started = time.perf_counter()
        for i in range(max(len(p) for p in payloads)):
            for publisher, batches in zip(publishers, payloads, strict=True):
                if i < len(batches):
                    publisher.publish_payload(batches[i])
        while last_seqs(client, specs) != finals:
            time.sleep(0.005)  # each look costs Redis time too; 5 ms is 0.1% of the run
        seconds = time.perf_counter() - started
        return seconds, Cpu.now(client, ingest.process.pid) - cpu
    finally:
        ingest.close()
        for publisher in publishers:
            publisher.close()


def in_process(url: str, streams: list[list[list[Event]]], baseline: bool) -> float:
    """Decode and apply the recorded stream in this process; returns seconds."""
    payloads = [[encode_batch(ENCODING, events, ts=1.0) for events in s] for s in streams]
    client = redis.Redis.from_url(url)
    client.flushdb()
    started = time.perf_counter()
    if baseline:
        applier = KthenaBaseline(client)
        for n, batches in enumerate(payloads):
            for payload in batches:
                applier.apply_batch(f"vllm-{n}.bench", MODEL, "vllm", decode_batch(payload), 1)
    else:
        applier = Applier(client)
        for n, batches in enumerate(payloads):
            stream = StreamSpec(StreamId(f"vllm-{n}.bench", 0), MODEL, "vllm", "", None, b"", 16)
            for at in range(0, len(batches), 200):
                chunk = [(at + i, decode_batch(p)) for i, p in enumerate(batches[at : at + 200])]
                applier.apply_batches(stream, chunk)
    return time.perf_counter() - started


# Run by `against` in a process whose sys.path starts with one checkout: that checkout's writer
# applies the payloads of argv[3] on an empty index at argv[2]; prints the seconds.
_APPLIER_RUN = """
import pickle, sys, time
sys.path.insert(0, sys.argv[1])
import redis
from kvadmin.index.streams import StreamId
from kvadmin.index.writer import Applier
from kvadmin.ingest.decode import decode_batch
from kvadmin.ingest.streams import StreamSpec
payloads = pickle.loads(open(sys.argv[3], "rb").read())
client = redis.Redis.from_url(sys.argv[2])
client.flushdb()
applier = Applier(client)
client.config_resetstat()
started, cpu = time.perf_counter(), time.process_time()
for n, batches in enumerate(payloads):
    stream = StreamSpec(StreamId(f"vllm-{n}.bench", 0), "M", "vllm", "", None, b"", 16)
    for at in range(0, len(batches), 200):
        chunk = [(at + i, decode_batch(p)) for i, p in enumerate(batches[at : at + 200])]
        applier.apply_batches(stream, chunk)
wall, cpu = time.perf_counter() - started, time.process_time() - cpu
scripts = client.info("commandstats")["cmdstat_evalsha"]["usec"] / 1e6
print(wall, cpu, scripts)
"""


def against(url: str, streams: list[list[list[Event]]], ref: str, rounds: int) -> None:
    """This checkout's applier against REF's, in alternating rounds; prints blocks/s and ratio."""
    payloads = [[encode_batch(ENCODING, events, ts=1.0) for events in s] for s in streams]
    blocks = stored_blocks(streams)
    with tempfile.TemporaryDirectory() as workdir:
        before = Path(workdir) / "before"
        before.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(before)], input=archive, check=True)
        recorded = Path(workdir) / "payloads.pickle"
        recorded.write_bytes(pickle.dumps(payloads))
        runs: dict[str, list[tuple[float, ...]]] = {"before": [], "after": []}
        for _ in range(rounds):
            for side, tree in (("before", before), ("after", ROOT)):
                run = [sys.executable, "-c", _APPLIER_RUN, str(tree), url, str(recorded)]
                # In the tree's own directory: from this checkout's, the other side's modules
                # imported some of this checkout's (sys.path's "" is the working directory).
                out = subprocess.run(
                    run, check=True, stdout=subprocess.PIPE, text=True, cwd=tree
                ).stdout
                runs[side].append(tuple(float(x) for x in out.split()))
    # Per side, the best run of each figure: wall seconds, applier CPU, Redis script CPU.
    best = {side: [min(f) for f in zip(*times, strict=True)] for side, times in runs.items()}
    for side, label in (("before", ref), ("after", "this checkout")):
        wall, cpu, scripts = best[side]
        print(f"applier in process, {label}: best {blocks / wall:,.0f} blocks/s "
              f"({', '.join(f'{blocks / t[0]:,.0f}' for t in runs[side])}); per block "
              f"Redis scripts {scripts / blocks * 1e6:.2f} us, "
              f"applier {cpu / blocks * 1e6:.2f} us")  # fmt: skip
    ratios = [b / a for b, a in zip(best["before"], best["after"], strict=True)]
    print(f"ratio this checkout / {ref} (best of {rounds}; above 1 is faster): blocks/s "
          f"{ratios[0]:.3f}x, Redis script CPU {ratios[2]:.3f}x, "
          f"applier CPU {ratios[1]:.3f}x")  # fmt: skip


def lag(url: str, streams: list[list[list[Event]]]) -> list[float]:
    """Publish at a steady LAG_BLOCKS_PER_SECOND; per batch, seconds from publish to visible."""
    client = redis.Redis.from_url(url, decode_responses=True)
    client.flushdb()
    publishers = [Publisher(encoding=ENCODING) for _ in streams]
    specs = [spec(n, p) for n, p in enumerate(publishers)]
    ingest = IngestProcess(url, specs)
    published: list[dict[int, float]] = [{} for _ in streams]
    lags: list[float] = []
    done = threading.Event()

    def observe() -> None:
        seen = [-1] * len(specs)
        while not done.is_set():
            now = time.perf_counter()
            for n, seq in enumerate(last_seqs(client, specs)):
                for s in range(seen[n] + 1, seq + 1):
                    lags.append(now - published[n][s])
                seen[n] = max(seen[n], seq)
            time.sleep(0.001)

    try:
        wait_connected(client, specs, publishers)
        watcher = threading.Thread(target=observe)
        watcher.start()
        rounds = max(len(s) for s in streams)
        order = [(n, s[i]) for i in range(rounds) for n, s in enumerate(streams) if i < len(s)]
        started = time.perf_counter()
        blocks = 0
        for n, events in order:
            elapsed = time.perf_counter() - started
            if elapsed > LAG_SECONDS:
                break
            ahead = blocks / LAG_BLOCKS_PER_SECOND - elapsed
            if ahead > 0:
                time.sleep(ahead)
            seq = publishers[n].next_seq
            published[n][seq] = time.perf_counter()
            publishers[n].publish_payload(encode_batch(ENCODING, events))
            blocks += sum(len(e.block_hashes) for e in events if isinstance(e, BlockStored))
        finals = [p.next_seq - 1 for p in publishers]
        deadline = time.monotonic() + 30
        while last_seqs(client, specs) != finals and time.monotonic() < deadline:
            time.sleep(0.005)
        done.set()
        watcher.join()
        return lags
    finally:
        ingest.close()
        for publisher in publishers:
            publisher.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=6000, help="prompts served per engine")
    parser.add_argument("--against", metavar="REF", help="compare the applier with REF's")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of --against")
    args = parser.parse_args()
    streams = record(args.requests)
    blocks = stored_blocks(streams)
    events = sum(len(e) for s in streams for e in s)
    batches = sum(len(s) for s in streams)
    print(f"recorded: {ENGINES} engines, {batches:,} batches, {events:,} events, "
          f"{blocks:,} stored blocks (with tokens or offload placeholders)")  # fmt: skip
    if args.against:
        with RedisServer() as server:
            against(server.url, streams, args.against, args.rounds)
        return
    with RedisServer() as server:
        e2e, cpu = end_to_end(server.url, streams)
        kvadmin_local = in_process(server.url, streams, baseline=False)
        baseline_local = in_process(server.url, streams, baseline=True)
        lags = lag(server.url, streams)
    rate = blocks / e2e
    print(f"kvadmin, ZMQ -> one ingest process -> Redis: {rate:>10,.0f} blocks/s ({e2e:.2f} s)")
    print(f"kvadmin applier, in process:               {blocks / kvadmin_local:>10,.0f} blocks/s")
    print(f"kthena-style baseline, in process:         {blocks / baseline_local:>10,.0f} blocks/s")
    print(f"ratio end to end / baseline: {rate / (blocks / baseline_local):.2f}x "
          f"(applier alone: {baseline_local / kvadmin_local:.2f}x)")  # fmt: skip
    cuts = quantiles(lags, n=100)
    print(f"lag at {LAG_BLOCKS_PER_SECOND:,} blocks/s over {len(lags):,} batches: "
          f"p50 {cuts[49] * 1000:.1f} ms, p99 {cuts[98] * 1000:.1f} ms")  # fmt: skip
    per_block = [seconds / blocks * 1e6 for seconds in (cpu.redis, cpu.ingest, cpu.publishers)]
    cores = os.cpu_count() or 1
    print(f"CPU per stored block end to end: Redis {per_block[0]:.1f} us, ingest process "
          f"{per_block[1]:.1f} us, publishers {per_block[2]:.1f} us; on {cores} cores they "
          f"allow at most {cores / sum(per_block) * 1e6:,.0f} blocks/s, Redis alone on one "
          f"core {1e6 / per_block[0]:,.0f}")  # fmt: skip
    print(f"of Redis's time per stored block: {cpu.scripts / blocks * 1e6:.1f} us in the script "
          f"calls, {cpu.commands / blocks * 1e6:.1f} us of them in the {cpu.calls / blocks:.1f} "
          f"index commands they run (Redis's commandstats)")  # fmt: skip


if __name__ == "__main__":
    main()
