"""Memory of the per-pod history Redis keeps for the console's time ranges: Redis bytes per pod
for a day, for fleets of 10, 100 and 1,000 pods.

Two structures hold it (docs/capacity.md section 5):
- the per-minute hit buckets (`kvadmin.metrics.recorder.hits_key`, a HASH per minute kept
  HITS_TTL_SECONDS = 25 h): a few fleet-wide fields, and per pod chosen in that minute its
  decisions (`p:`), requested blocks (`pb:`) and matched blocks per medium (`pm:`);
- the per-pod samples of blocks per medium (`kvadmin.residency.samples`): before, a ZSET per
  pod of one member every 5 s for 24 h (17,280 members); after (downsampled), every sample of
  the last hour (720) and the first of each minute for 24 h (1,441) in a second ZSET.

A busy fleet is the worst case and the one measured: every pod is chosen every minute and
matches blocks in two media (GPU, CPU). A bucket of the measured fleet is written by the real
recorder (`record_decision`, once per pod) and then copied, field for field, into the other
minutes (the buckets are alike, so this costs seconds instead of a day of decisions); the
samples are written by the real `record_samples`, one call per 5 s of a day, and, as the
baseline in the same run, by the writer before downsampling (kept here); the chart's read of
each layout is timed over 1 h, 6 h and 24 h (the read before is kept here too). Pod ids are as
short as the demo's (`vllm-12.default`) and as long as Kubernetes makes them (70 characters),
under the embedded Redis's hash-max-listpack-value (512) and Redis's default (64).

Per fleet size: Redis `used_memory` before and after all 1,500 buckets (25 h), per pod and per
day of history, and the buckets' encoding: a listpack while a bucket has at most
hash-max-listpack-entries fields (512 compiled in; redis.conf's example sets 128), each at
most hash-max-listpack-value bytes, else a hashtable.

Run: .venv/bin/python bench/history.py
"""

import json
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kvadmin.redis_server import RedisServer

FLEETS = (10, 100, 1000)
BUCKETS_KEPT = 25 * 60
SAMPLES_PODS = 10
SAMPLE_SECONDS = 5
NOW = 1_760_000_000
RANGES = {"1h": 3600, "6h": 6 * 3600, "24h": 86400}
READS = 30


def pod_ids(n: int, long_ids: bool) -> list[str]:
    if long_ids:  # a Deployment's pod name and a namespace, 70 characters
        return [
            f"qwen3-8b-instruct-decode-7f9c8d6b5-{i:05d}.inference-production-eu" for i in range(n)
        ]
    return [f"vllm-{i}.default" for i in range(n)]


def one_bucket(client, pods: list[str], minute: int) -> dict[str, str]:
    """Every field of one minute's bucket when each pod was chosen once, written by the real
    recorder; returns the bucket."""
    from kvadmin.metrics.recorder import hits_key, record_decision
    from kvadmin.routing.decisions import Decision, Dropped, PodExplanation

    pipe = client.pipeline(transaction=False)
    for pod in pods:
        scored = PodExplanation(
            pod=pod, score=80, matched_blocks=100, weighted_sum=95.0,
            media={"GPU": 80, "CPU": 20}, runs=[("GPU", 80), ("CPU", 20)],
        )  # fmt: skip
        decision = Decision(
            decision_id="bench", ts=minute * 60.0, request_id=None, model="m/a", input="token_ids",
            tokens=2048, blocks=128, first_block=1, longest_match=100, candidates=pods,
            chosen=pod, tie_break=False, scores=[scored],
            dropped=Dropped(non_candidates=[], stale=[]), weights_version=1,
            weights={"GPU": 1.0, "CPU": 0.8}, timings_ms={},
        )  # fmt: skip
        record_decision(pipe, decision)
    pipe.execute()
    return client.hgetall(hits_key(minute))


def measure_buckets(client, pods: list[str]) -> tuple[float, str, int]:
    """Bytes per pod for BUCKETS_KEPT buckets, the buckets' encoding, their field count."""
    from kvadmin.metrics.recorder import HITS_TTL_SECONDS, hits_key

    client.flushdb()
    start_minute = NOW // 60
    before = client.info("memory")["used_memory"]
    bucket = one_bucket(client, pods, start_minute)
    pipe = client.pipeline(transaction=False)
    for minute in range(start_minute + 1, start_minute + BUCKETS_KEPT):
        pipe.hset(hits_key(minute), mapping=bucket)
        pipe.expire(hits_key(minute), HITS_TTL_SECONDS)
        if minute % 100 == 0:
            pipe.execute()
    pipe.execute()
    used = client.info("memory")["used_memory"] - before
    encoding = client.object("encoding", hits_key(start_minute))
    return used / len(pods), encoding, len(bucket)


EVENLY_BEFORE = """
local first = redis.call('ZCOUNT', KEYS[1], '-inf', '(' .. ARGV[2])
local n = redis.call('ZCOUNT', KEYS[1], ARGV[2], ARGV[3])
local points = tonumber(ARGV[1])
if n == 0 then
  return {}
end
if n <= points then
  return redis.call('ZRANGE', KEYS[1], first, first + n - 1)
end
local out = {}
for i = 0, points - 1 do
  local rank = first + math.floor(i * (n - 1) / (points - 1))
  out[#out + 1] = redis.call('ZRANGE', KEYS[1], rank, rank)[1]
end
return out
"""
"""The chart's read before downsampling (the baseline): MAX_POINTS samples evenly by rank."""


def record_samples_before(client, summaries, now: int) -> None:
    """The writer before downsampling (the baseline): every sample kept for a day."""
    from kvadmin.metrics.timerange import RETENTION_SECONDS
    from scoring.keys import pod_samples_key

    for summary in summaries:
        key = pod_samples_key(summary.pod)
        member = json.dumps({"t": now, "c": summary.counts}, separators=(",", ":"))
        client.zadd(key, {member: now})
        client.zremrangebyscore(key, "-inf", f"({now - RETENTION_SECONDS}")
        client.expire(key, RETENTION_SECONDS)


def read_chart_before(client, pod: str, start: int, end: int) -> list[dict]:
    from kvadmin.residency.samples import MAX_POINTS
    from scoring.keys import pod_samples_key

    script = client.register_script(EVENLY_BEFORE)
    members = script(keys=[pod_samples_key(pod)], args=[MAX_POINTS, start, end])
    return [json.loads(member) for member in members]


def measure_samples(client, pods: list[str], record) -> float:
    """Bytes per pod for a day of 5-second samples written by `record` (the writer before or
    the real one after), one call per sample, pipelined."""
    from kvadmin.metrics.timerange import RETENTION_SECONDS

    client.flushdb()
    before = client.info("memory")["used_memory"]
    pipe = client.pipeline(transaction=False)
    for at in range(NOW - RETENTION_SECONDS + SAMPLE_SECONDS, NOW + 1, SAMPLE_SECONDS):
        age = NOW - at
        # What record_samples reads of a PodSummary: its pod and its blocks per medium.
        counts = {"GPU": 24_000 - age % 997, "CPU": 90_000 + age % 4999}
        record(pipe, [SimpleNamespace(pod=pod, counts=counts) for pod in pods], at)
        if at % 1000 == 0:
            pipe.execute()
    pipe.execute()
    return (client.info("memory")["used_memory"] - before) / len(pods)


def read_times(client, read, pod: str) -> dict[str, tuple[float, int]]:
    """Per range, the p50 milliseconds of `read` (READS reads) and the points it returns."""
    out = {}
    for name, seconds in RANGES.items():
        took = []
        for _ in range(READS):
            started = time.perf_counter()
            points = len(read(client, pod, NOW - seconds, NOW))
            took.append(time.perf_counter() - started)
        out[name] = (statistics.median(took) * 1000, points)
    return out


def read_chart_after(client, pod: str, start: int, end: int) -> list[int]:
    from kvadmin.residency.samples import read_chart

    return read_chart(client, pod, start, end).times


def main() -> None:
    import os

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kvadmin.settings")
    os.environ.setdefault("SECRET_KEY", "bench")
    import django

    django.setup()
    import redis

    from kvadmin.residency.samples import record_samples

    server = RedisServer().start()
    try:
        client = redis.Redis.from_url(server.url, decode_responses=True)
        print(
            "per-pod history in Redis, bytes per pod (a busy fleet: every pod chosen each minute)"
        )
        print(f"{'pod ids':10} {'listpack-value':>14} {'pods':>5} {'fields/bucket':>13} "
              f"{'encoding':>9} {'hit buckets (25 h)':>18} {'per day':>9}")  # fmt: skip
        results: dict[tuple[bool, int], float] = {}
        for long_ids in (False, True):
            for limit in (512, 64):
                client.config_set("hash-max-listpack-value", limit)
                for n in FLEETS:
                    per_pod, encoding, fields = measure_buckets(client, pod_ids(n, long_ids))
                    if limit == 512:
                        results[long_ids, n] = per_pod
                    print(
                        f"{'long' if long_ids else 'short':10} {limit:14} {n:5} {fields:13} "
                        f"{encoding:>9} {per_pod:18,.0f} {per_pod * 24 / 25:9,.0f}"
                    )
        client.config_set("hash-max-listpack-value", 512)
        pods = {long_ids: pod_ids(SAMPLES_PODS, long_ids) for long_ids in (False, True)}
        samples: dict[tuple[str, bool], float] = {}
        reads: dict[str, dict[str, tuple[float, int]]] = {}
        for label, record, read in (
            ("before", record_samples_before, read_chart_before),
            ("after", record_samples, read_chart_after),
        ):
            for long_ids in (False, True):
                samples[label, long_ids] = measure_samples(client, pods[long_ids], record)
            reads[label] = read_times(client, read, pods[True][0])
        print(
            f"\npod samples, bytes per pod for a day (one per {SAMPLE_SECONDS} s, "
            f"{86400 // SAMPLE_SECONDS:,} a pod):"
        )
        print(f"  {'':7} {'short ids':>10} {'long ids':>10}")
        for label, layout in (
            ("before", "every sample kept 24 h"),
            ("after", "every sample the last hour, one a minute for 24 h"),
        ):
            print(
                f"  {label:7} {samples[label, False]:10,.0f} {samples[label, True]:10,.0f}"
                f"   {layout}"
            )
        ratio = samples["before", True] / samples["after", True]
        print(
            f"  ratio   {samples['before', False] / samples['after', False]:10.1f}x {ratio:9.1f}x"
        )
        print(f"\na pod's blocks chart, p50 of {READS} reads (ms) and the points it shows:")
        for name in RANGES:
            (old_ms, old_points), (new_ms, new_points) = reads["before"][name], reads["after"][name]
            print(
                f"  {name:>4}: before {old_ms:6.2f} ms, {old_points:5} points; "
                f"after {new_ms:6.2f} ms, {new_points:5} points ({new_ms / old_ms:.2f}x)"
            )
        print("\nwhole history (embedded Redis, long ids), hit buckets + samples:")
        for n in FLEETS[1:]:
            totals = [
                (results[True, n] + samples[label, True]) * n for label in ("before", "after")
            ]
            print(
                f"  {n:5} pods: before {totals[0] / 2**20:8,.1f} MiB, "
                f"after {totals[1] / 2**20:8,.1f} MiB "
                f"({totals[1] / n / 1e6:.2f} MB a pod, {totals[0] / totals[1]:.1f}x less)"
            )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
