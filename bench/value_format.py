"""The two index value formats (compatibility.md 2.7), in the same run against one private
redis-server: scoring a request under `legacy` (media read from kvadmin's residency in the walk's
round trip) against `tiered` (media in the values), and the switch from one to the other.

Run from the project root: `.venv/bin/python bench/value_format.py`.

The index is written by the real writer (Applier): 32 pods of one model, each storing 2,000
blocks in GPU and offloading a quarter of them to CPU; the request is 128 blocks that 16 pods
hold to various depths. Baseline: the tiered walk of the same request on the same index. The
switch is timed to legacy and back: steps of `KEYS_PER_STEP` matrix keys, the longest step is
the longest time Redis spends on one of them (the bound on what the rewrite takes from the
router's reads), and keys per second is the throughput.
"""

import random
import sys
import time
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import percentile
from kvadmin.index import value_format
from kvadmin.index.events import BlockRemoved, BlockStored, EventBatch
from kvadmin.index.writer import Applier
from kvadmin.redis_server import RedisServer
from scoring.hashing import block_hashes
from scoring.index import IndexReader
from scoring.keys import BLOCK_KEY_PREFIX
from scoring.values import ValueFormat
from scoring.weights import TierWeights

MODEL = "Qwen/Qwen3-8B"
PODS = [f"vllm-{i}.inference" for i in range(32)]
BLOCKS_PER_POD = 2000
REQUEST_BLOCKS = 128
KEYS_PER_STEP = 500
ROUNDS = 2000
NOW = 1_760_000_000
WEIGHTS = TierWeights()


def build_index(client: redis.Redis, rng: random.Random) -> list[int]:
    """Returns the request's token ids."""
    applier = Applier(client)
    request = [rng.randrange(151_000) for _ in range(16 * REQUEST_BLOCKS)]
    for number, pod in enumerate(PODS):
        depth = rng.randrange(8, REQUEST_BLOCKS) if number % 2 == 0 else 0
        tokens = request[: 16 * depth]
        tokens += [rng.randrange(151_000) for _ in range(16 * (BLOCKS_PER_POD - depth))]
        hashes = tuple(str(number * 10**6 + n) for n in range(BLOCKS_PER_POD))
        events: list = []
        for first in range(0, BLOCKS_PER_POD, 100):
            chunk = tokens[16 * first : 16 * (first + 100)]
            events.append(BlockStored(hashes[first : first + 100], tuple(chunk), 16, "GPU"))
        for n in rng.sample(range(BLOCKS_PER_POD), BLOCKS_PER_POD // 4):
            events += [BlockStored((hashes[n],), (), 0, "CPU"), BlockRemoved((hashes[n],), "GPU")]
        applier.apply_batch(pod, MODEL, "vllm", 0, 0, EventBatch(0.0, events), now=NOW)
    return request


def walk_ms(client: redis.Redis, blocks: list[int], fmt: ValueFormat) -> list[float]:
    reader = IndexReader()
    reader.walk(client, MODEL, blocks, set(PODS), {}, value_format=fmt)
    samples = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        reader.walk(client, MODEL, blocks, set(PODS), {}, value_format=fmt)
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def switch(client: redis.Redis, target: ValueFormat) -> tuple[float, int, float, int, float]:
    """Seconds, steps, longest step (ms, wall), values rewritten and the mean Redis time of
    one compare-and-set script call (ms) of one complete switch."""
    client.config_resetstat()
    began, longest, steps = time.perf_counter(), 0.0, 0
    while True:
        started = time.perf_counter()
        state = value_format.rewrite_step(client, target, WEIGHTS, KEYS_PER_STEP)
        longest = max(longest, (time.perf_counter() - started) * 1000)
        steps += 1
        if state.done:
            script = client.info("commandstats").get("cmdstat_eval", {}).get("usec_per_call", 0)
            seconds = time.perf_counter() - began
            return seconds, steps, longest, state.rewritten, script / 1000


def main() -> None:
    rng = random.Random(20261201)
    with RedisServer() as server:
        client = redis.Redis.from_url(server.url, decode_responses=True)
        blocks = block_hashes(build_index(client, rng))
        matrix_keys = sum(1 for _ in client.scan_iter(f"{BLOCK_KEY_PREFIX}*", count=1000))
        tiered = walk_ms(client, blocks, ValueFormat.TIERED)
        to_legacy = switch(client, ValueFormat.LEGACY)
        legacy = walk_ms(client, blocks, ValueFormat.LEGACY)
        to_tiered = switch(client, ValueFormat.TIERED)
        client.close()

    print(f"index: {matrix_keys} matrix keys, {len(PODS)} pods x {BLOCKS_PER_POD} blocks")
    print(f"walk of a {REQUEST_BLOCKS}-block request, {ROUNDS} rounds each (baseline: tiered)")
    for name, samples in (("tiered", tiered), ("legacy", legacy)):
        p50, p99 = percentile(samples, 0.5), percentile(samples, 0.99)
        print(f"  {name:7} p50 {p50:.3f} ms  p99 {p99:.3f} ms")
    ratio = percentile(legacy, 0.5) / percentile(tiered, 0.5)
    print(f"  legacy / tiered p50: {ratio:.2f}x")
    print(f"switch in steps of {KEYS_PER_STEP} keys:")
    for name, (seconds, steps, longest, rewritten, script_ms) in (
        ("to legacy", to_legacy),
        ("to tiered", to_tiered),
    ):
        print(
            f"  {name}: {rewritten} values in {seconds:.2f} s ({rewritten / seconds:,.0f}/s), "
            f"{steps} steps, longest step {longest:.1f} ms wall, "
            f"compare-and-set {script_ms:.2f} ms of Redis time per step"
        )


if __name__ == "__main__":
    main()
