"""Index memory benchmark (issue 26): Redis bytes per (block, pod) ownership, kvadmin against the
kthena-style baseline, on the ingest benchmark's recorded stream, in the same run.

1. Records the ingest benchmark's stream (`bench/ingest.py`: 8 simulated vLLM engines, GPU tier
   with LRU eviction, CPU offload through placeholders).
2. Applies it once with kvadmin's applier (as configured by default: no kthena sidecar mapping
   keys, compatibility.md 2.3), once more with the mapping keys on, and twice with the
   kthena-style baseline
   (`bench/baseline.py`): with values "{unix seconds}|{medium}", as kthena's sidecar
   writes them, and with "1|{medium}", as issue 26 measured it (9 bytes shorter per value).
   Each goes into an empty Redis database; Redis's
   `used_memory` before and after: bytes per ownership (a field of a kthena matrix hash, the
   pod owning the block) and per stored block (a matrix key).
3. Breaks each index down by key family with `MEMORY USAGE` of every key (SAMPLES 0: the exact
   size of each value), and names each family's Redis encodings.
4. Applies it with kvadmin's applier again with pod ids as long as Kubernetes makes them, under
   Redis's default hash-max-listpack-value (64) and under the embedded server's.
5. Measures bucketed layouts (docs/capacity.md section 1; the engine blocks moved to one with
   issue 35): 100,000 residency entries and engine blocks in one sorted set or hash, against
   the same spread over 1,000 small ones that Redis keeps as listpacks.
6. Times both appliers on the same stream (in process, as `bench/ingest.py` step 3 does): the
   memory layout must not cost ingest throughput.

Run: .venv/bin/python bench/memory.py [--requests N]
"""

import argparse
import random
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import redis

from bench.baseline import KthenaBaseline
from bench.ingest import ENCODING, MODEL, record, stored_blocks
from kvadmin.fleet.wire import encode_batch
from kvadmin.index.streams import StreamId
from kvadmin.index.writer import Applier
from kvadmin.ingest.decode import decode_batch
from kvadmin.ingest.streams import StreamSpec
from kvadmin.redis_server import HASH_MAX_LISTPACK_VALUE, RedisServer
from scoring.keys import BLOCK_KEY_PREFIX

FAMILIES = (
    ("matrix hashes", BLOCK_KEY_PREFIX),
    ("mapping keys", "vllm:kv:block:"),
    ("engine blocks", "kvadmin:eb:"),
    ("residency", "kvadmin:res:"),
    ("refcounts", "kvadmin:rc:"),
    ("stream status", "kvadmin:stream:"),
    ("retired generations", "kvadmin:eb-retired:"),
)
"""Key families by prefix, first match wins; every other key is "other"."""


def family(key: str) -> str:
    for name, prefix in FAMILIES:
        if key.startswith(prefix):
            return name
    return "other"


@dataclass
class Footprint:
    """What one index costs in one Redis database."""

    used: int
    """used_memory after the stream minus before it, bytes."""
    seconds: float
    redis_cpu: float
    """CPU seconds Redis spent meanwhile (user + system): steadier than wall time on a shared
    machine."""
    ownerships: int
    blocks: int
    """Matrix keys (distinct stored blocks)."""
    bytes_by_family: Counter = field(default_factory=Counter)
    keys_by_family: Counter = field(default_factory=Counter)
    encodings: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))

    @property
    def per_ownership(self) -> float:
        return self.used / self.ownerships


def redis_cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return info["used_cpu_user"] + info["used_cpu_sys"]


def measure(client: redis.Redis, apply) -> Footprint:
    """Apply the stream into the emptied database with `apply`, then take its footprint."""
    client.flushall()
    client.memory_purge()
    before = client.info("memory")["used_memory"]
    cpu = redis_cpu(client)
    started = time.perf_counter()
    apply()
    seconds = time.perf_counter() - started
    cpu = redis_cpu(client) - cpu
    client.memory_purge()
    used = client.info("memory")["used_memory"] - before
    footprint = Footprint(used, seconds, cpu, 0, 0)
    batch = []

    def flush() -> None:
        pipe = client.pipeline(transaction=False)
        for key in batch:
            pipe.memory_usage(key, samples=0)
            pipe.object("encoding", key)
            if key.startswith(BLOCK_KEY_PREFIX.encode()):
                pipe.hlen(key)
        replies = iter(pipe.execute())
        for key in batch:
            name = family(key.decode())
            footprint.bytes_by_family[name] += next(replies)
            footprint.keys_by_family[name] += 1
            footprint.encodings[name][next(replies).decode()] += 1
            if name == "matrix hashes":
                footprint.ownerships += next(replies)
                footprint.blocks += 1
        batch.clear()

    for key in client.scan_iter(count=1000):
        batch.append(key)
        if len(batch) == 1000:
            flush()
    flush()
    return footprint


def bench_pod(n: int) -> str:
    return f"vllm-{n}.bench"


def kubernetes_pod(n: int) -> str:
    """A pod id as a Deployment's pods get them: 70 characters, longer than the 64 bytes up to
    which Redis keeps a hash's entries in a listpack by default."""
    return f"vllm-qwen3-8b-instruct-decode-7c9f8d6b5-x2x{n:02}.llm-inference-production"


def kvadmin_apply(
    client: redis.Redis, payloads: list[list[bytes]], pod=bench_pod, mapping_keys: bool = False
):
    def apply() -> None:
        applier = Applier(client, mapping_keys=mapping_keys)
        for n, batches in enumerate(payloads):
            stream = StreamSpec(StreamId(pod(n), 0), MODEL, "vllm", "", None, b"", 16)
            for at in range(0, len(batches), 200):
                chunk = [(at + i, decode_batch(p)) for i, p in enumerate(batches[at : at + 200])]
                applier.apply_batches(stream, chunk)

    return apply


def baseline_apply(client: redis.Redis, payloads: list[list[bytes]], now: int):
    def apply() -> None:
        applier = KthenaBaseline(client)
        for n, batches in enumerate(payloads):
            for payload in batches:
                applier.apply_batch(f"vllm-{n}.bench", MODEL, "vllm", decode_batch(payload), now)

    return apply


ENTRIES = 100_000
BUCKETS = 1000


def alternatives(client: redis.Redis) -> list[str]:
    """Bytes per entry of kvadmin's two large structures, as one key and bucketed."""
    rng = random.Random(1)
    stds = [str(rng.randrange(1 << 63)) for _ in range(ENTRIES)]
    engine_hashes = [str(rng.randrange(1 << 64)) for _ in range(ENTRIES)]
    now = int(time.time() * 1e6)

    def residency(pipe, n: int, bucketed: bool) -> None:
        pipe.zadd(f"res|{stds[n][-3:]}" if bucketed else "res", {stds[n]: now + n})

    def engine_blocks(pipe, n: int, bucketed: bool) -> None:
        key = f"eh|{engine_hashes[n][-3:]}" if bucketed else "eh"
        pipe.hset(key, engine_hashes[n], f"{stds[n]}|GPU")

    lines = []
    for name, write in (("residency ZSET", residency), ("engine-blocks HASH", engine_blocks)):
        sizes = []
        for bucketed in (False, True):
            client.flushall()
            client.memory_purge()
            before = client.info("memory")["used_memory"]
            pipe = client.pipeline(transaction=False)
            for n in range(ENTRIES):
                write(pipe, n, bucketed)
            pipe.execute()
            client.memory_purge()
            sizes.append((client.info("memory")["used_memory"] - before) / ENTRIES)
        lines.append(
            f"{name}: {sizes[0]:.0f} bytes per entry as one key, {sizes[1]:.0f} in {BUCKETS:,} "
            f"listpack buckets ({ENTRIES:,} entries)"
        )
    return lines


def report(name: str, footprint: Footprint, ownerships: int) -> None:
    print(
        f"{name}: {footprint.used / 1e6:.1f} MB for {footprint.ownerships:,} ownerships "
        f"in {footprint.blocks:,} matrix keys: {footprint.per_ownership:.0f} bytes per ownership, "
        f"{footprint.used / footprint.blocks:.0f} per stored block"
    )
    total = sum(footprint.bytes_by_family.values())
    for family_name, size in footprint.bytes_by_family.most_common():
        count = footprint.keys_by_family[family_name]
        encodings = ", ".join(
            f"{encoding} {n:,}" for encoding, n in footprint.encodings[family_name].most_common()
        )
        print(
            f"  {family_name:<15} {size / ownerships:>6.1f} B/ownership "
            f"({size / total:>5.1%}; {count:,} keys, {size / count:.0f} B/key; {encodings})"
        )
    print(f"  (MEMORY USAGE covers {total / footprint.used:.0%} of used_memory)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=6000, help="prompts served per engine")
    args = parser.parse_args()
    streams = record(args.requests)
    blocks = stored_blocks(streams)
    payloads = [[encode_batch(ENCODING, events, ts=1.0) for events in s] for s in streams]
    print(f"recorded: {len(streams)} engines, {blocks:,} stored blocks")
    with RedisServer() as server:
        client = redis.Redis.from_url(server.url)
        print(f"Redis {client.info('server')['redis_version']}")
        kvadmin = measure(client, kvadmin_apply(client, payloads))
        with_mapping = measure(client, kvadmin_apply(client, payloads, mapping_keys=True))
        baseline = measure(client, baseline_apply(client, payloads, int(time.time())))
        issue = measure(client, baseline_apply(client, payloads, 1))
        long_ids = {}
        for limit in (64, HASH_MAX_LISTPACK_VALUE):  # Redis's default, the embedded server's
            client.config_set("hash-max-listpack-value", limit)
            long_ids[limit] = measure(client, kvadmin_apply(client, payloads, kubernetes_pod))
        layouts = alternatives(client)
    report("kvadmin", kvadmin, kvadmin.ownerships)
    report("kvadmin with KVADMIN_SIDECAR_MAPPING_KEYS=on", with_mapping, with_mapping.ownerships)
    report("kthena-style baseline, values 'unix seconds|medium' as kthena writes", baseline,
           baseline.ownerships)  # fmt: skip
    report("the same with values '1|medium' (issue 26's measurement)", issue, issue.ownerships)
    for name, other in (("baseline", baseline), ("issue 26's baseline", issue)):
        print(
            f"ratio bytes per ownership kvadmin / {name}: "
            f"{kvadmin.per_ownership / other.per_ownership:.2f}x "
            f"(kvadmin indexes {kvadmin.ownerships / other.ownerships:.1f}x the ownerships)"
        )
    print(
        f"ratio bytes per ownership kvadmin with mapping keys on / baseline: "
        f"{with_mapping.per_ownership / baseline.per_ownership:.2f}x; Redis CPU per stored "
        f"block, mapping keys off / on: {kvadmin.redis_cpu / with_mapping.redis_cpu:.2f}x"
    )
    print(
        f"kvadmin with {len(kubernetes_pod(0))}-character pod ids: "
        + ", ".join(
            f"{footprint.per_ownership:.0f} bytes per ownership and Redis CPU "
            f"{footprint.redis_cpu / blocks * 1e6:.1f} us per stored block at "
            f"hash-max-listpack-value {limit}"
            for limit, footprint in long_ids.items()
        )
        + f" (the embedded Redis's {HASH_MAX_LISTPACK_VALUE}; Redis's default is 64)"
    )
    print("\n".join(layouts))
    for name, footprint in (
        ("kvadmin", kvadmin),
        ("kvadmin, mapping keys on", with_mapping),
        ("baseline", baseline),
    ):
        print(
            f"{name} in process: {blocks / footprint.seconds:,.0f} blocks/s, Redis CPU "
            f"{footprint.redis_cpu / blocks * 1e6:.1f} us per stored block"
        )


if __name__ == "__main__":
    main()
