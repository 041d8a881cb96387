"""Memory of the per-pod history Redis keeps for the console's time ranges: Redis bytes per pod
for a day, for fleets of 10, 100 and 1,000 pods.

Two structures hold it (docs/capacity.md section 5):
- the per-minute hit buckets (`kvadmin.metrics.recorder.hits_key`, a HASH per minute kept
  HITS_TTL_SECONDS = 25 h): a few fleet-wide fields, and per pod chosen in that minute its
  decisions (`p:`), requested blocks (`pb:`) and matched blocks per medium (`pm:`);
- the per-pod samples of blocks per medium (`kvadmin.residency.samples`, a ZSET per pod, one
  member every 5 s for 24 h: 17,280 members).

A busy fleet is the worst case and the one measured: every pod is chosen every minute and
matches blocks in two media (GPU, CPU). A bucket of the measured fleet is written by the real
recorder (`record_decision`, once per pod) and then copied, field for field, into the other
minutes (the buckets are alike, so this costs seconds instead of a day of decisions); the
samples are written by the real `record_samples`, one call per 5 s of a day. Pod ids are as
short as the demo's (`vllm-12.default`) and as long as Kubernetes makes them (70 characters),
under the embedded Redis's hash-max-listpack-value (512) and Redis's default (64).

Per fleet size: Redis `used_memory` before and after all 1,500 buckets (25 h), per pod and per
day of history, and the buckets' encoding: a listpack while a bucket has at most
hash-max-listpack-entries fields (512 compiled in; redis.conf's example sets 128), each at
most hash-max-listpack-value bytes, else a hashtable.

Run: .venv/bin/python bench/history.py
"""

import sys
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
            id="bench", ts=minute * 60.0, request_id=None, model="m/a", input="token_ids",
            n_tokens=2048, n_blocks=128, first_block=1, longest_match=100, candidates=pods,
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


def measure_samples(client, pods: list[str]) -> float:
    """Bytes per pod for a day of 5-second samples (the real writer, one call per sample)."""
    from kvadmin.residency.samples import RETENTION_SECONDS, record_samples

    client.flushdb()
    before = client.info("memory")["used_memory"]
    for at in range(NOW - RETENTION_SECONDS + SAMPLE_SECONDS, NOW + 1, SAMPLE_SECONDS):
        age = NOW - at
        # What record_samples reads of a PodSummary: its pod and its blocks per medium.
        counts = {"GPU": 24_000 - age % 997, "CPU": 90_000 + age % 4999}
        record_samples(client, [SimpleNamespace(pod=pod, counts=counts) for pod in pods], at)
    return (client.info("memory")["used_memory"] - before) / len(pods)


def main() -> None:
    import os

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kvadmin.settings")
    os.environ.setdefault("SECRET_KEY", "bench")
    import django

    django.setup()
    import redis

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
        samples = {
            long_ids: measure_samples(client, pod_ids(SAMPLES_PODS, long_ids))
            for long_ids in (False, True)
        }
        print(
            f"\npod samples (24 h, one per {SAMPLE_SECONDS} s, {86400 // SAMPLE_SECONDS:,} a pod): "
            f"{samples[False]:,.0f} bytes per pod (short ids), {samples[True]:,.0f} (long ids)"
        )
        print("\nwhole history (embedded Redis, long ids), hit buckets + samples:")
        for n in FLEETS[1:]:
            total = (results[True, n] + samples[True]) * n
            print(f"  {n:5} pods: {total / 2**20:8,.1f} MiB")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
