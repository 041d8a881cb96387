"""Scoring latency from token ids to explained result: kthena's way (BaselineIndexReader)
against kvadmin's (IndexReader), in the same run, against the same private redis-server.

Run from the project root: `.venv/bin/python bench/score.py [--baseline REV]`.

The index: 32 pods serving one model. The request has 2,048 tokens (128 blocks): a system prompt
of 8 blocks that every pod holds; the conversation so far (blocks 8-111), which half the pods
hold to various depths, early blocks in GPU memory and older ones offloaded to CPU or pinned
memory on some pods; then the new user turn (blocks 112-127) that nobody holds yet. Two pods
restarted after writing (stale ownership). Around it: other prompts' blocks and the engine-hash
mapping keys, as ingestion leaves them. A second request starts a new conversation on the same
system prompt (only 8 blocks match).

Then the decision path itself, old beside new, on the conversation request: `kthena` (the walk,
then the highest score) against `ttft` (the same walk plus every candidate's routing state, read
in the same round trip, then the TTFT estimate of every candidate). The state: every pod has a
virtual queue and requests in flight, 8 pods speculative entries for the request's blocks, 24
pods a scraped load (16 fresh, 8 stale).

Last, the service itself, before and after: `routing.service.score` of this tree beside that of
REV (default `main`, exported with `git archive`), each in a process of its own
(bench/processes/service_worker.py) against the same Redis and database (32 engines registered), in
alternating rounds: both requests, both policies, recorded (as the API does) and not; then
`POST /api/v1/score` through each tree's ASGI server (uvicorn, one keep-alive client), recorded.
The figures are same-run ratios, new / before.

And the floor of this design: what a recorded decision costs before any Python of the decision
itself runs, from Redis' own time per script call (INFO commandstats) and this machine's round
trip, beside issue 36's targets (0.3x and 0.15x of the tree before's recorded service call).
Twice: as it is, and with the prefix walk free (what an in-process replica of the index, fed
by a change log, could at best take off: the routing state it reads and the recording stay).
"""

import argparse
import http.client
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.api import baseline_tree, start_server
from bench.harness import percentile
from kvadmin.redis_server import RedisServer
from scoring import route_record
from scoring.choice import choose
from scoring.hashing import block_hashes
from scoring.index import (
    WALK,
    BaselineIndexReader,
    IndexReader,
    PrefixReader,
    read_for_routing,
    score_request,
    script_input,
)
from scoring.keys import (
    ENGINE_HASH_TTL_SECONDS,
    block_key,
    block_value,
    engine_hash_key,
    in_flight_key,
    load_key,
    queue_key,
    rank_status_keys,
)
from scoring.policy import RouteRequest, choose_pod
from scoring.route_record import RouteAdvance
from scoring.route_state import StateRequest, load_reading, speculative_blocks
from scoring.score import ScoreResult
from scoring.ttft import DEFAULT_PARAMETERS, TtftParameters, estimate_prefill
from scoring.weights import TierWeights

MODEL = "Qwen/Qwen3-8B"
PODS = [f"vllm-{i}.inference" for i in range(32)]
SYSTEM_BLOCKS = 8
CONVERSATION_BLOCKS = 112
REQUEST_TOKENS = 2048
OTHER_PROMPTS = 2000
WARMUP = 300
ROUNDS = 3000
NOW = 1_760_000_000
WEIGHTS = TierWeights.from_config({"gpu": 1.0, "cpu": 0.8, "cpu_pinned": 0.9})
WEIGHTS_VERSION = 0  # the shipped defaults' version: no pod here learned under another
READERS: dict[str, PrefixReader] = {"baseline": BaselineIndexReader(), "kvadmin": IndexReader()}


def build_index(client: redis.Redis, rng: random.Random) -> tuple[list[int], dict[str, int]]:
    """Write the index; return the request's token ids and the pods' start times."""
    tokens = [rng.randrange(151_000) for _ in range(REQUEST_TOKENS)]
    blocks = block_hashes(tokens)
    started_at = {pod: NOW - 86_400 for pod in PODS}
    pipeline = client.pipeline(transaction=False)

    def store(block: int, pod: str, written_at: int, medium: str | None) -> None:
        pipeline.hset(block_key(MODEL, block), pod, block_value(written_at, medium))
        mapping = engine_hash_key("vllm", pod, rng.getrandbits(64))
        pipeline.set(mapping, str(block), ex=ENGINE_HASH_TTL_SECONDS)

    for pod in PODS:
        for position in range(SYSTEM_BLOCKS):
            store(blocks[position], pod, NOW - 3600, "GPU")
    for i, pod in enumerate(PODS[:16]):
        depth = CONVERSATION_BLOCKS - 6 * (i % 8)  # some pods evicted the newest turns
        offloaded_from = {0: depth, 1: 64, 2: 40, 3: 88}[i % 4]
        medium_after = "CPU_PINNED" if i % 8 == 3 else "CPU"
        for position in range(SYSTEM_BLOCKS, depth):
            turn = position // 16  # one turn's blocks are stored by one event, in one second
            medium = "GPU" if position < offloaded_from else medium_after
            store(blocks[position], pod, NOW - 600 + 60 * turn, medium)
    started_at[PODS[5]] = NOW - 600 + 60 * 3  # restarted mid-conversation
    started_at[PODS[21]] = NOW  # restarted after everything it holds
    for _ in range(OTHER_PROMPTS):
        owners = rng.sample(PODS, rng.randint(1, 4))
        for _ in range(rng.randint(4, 64)):
            block = rng.getrandbits(63)
            for pod in owners:
                store(block, pod, NOW - rng.randrange(7200), rng.choice(("GPU", "CPU", None)))
    pipeline.execute()
    return tokens, started_at


class Runs:
    """Per reader: the wall time of each scoring (ms), the median of each step, the result."""

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = {name: [] for name in READERS}
        self.steps: dict[str, list[tuple[float, float, float]]] = {name: [] for name in READERS}
        self.results: dict[str, ScoreResult] = {}

    def p(self, name: str, fraction: float) -> float:
        return percentile(self.times[name], fraction)

    def median_steps(self, name: str) -> str:
        hash_ms, read_ms, score_ms = (
            statistics.median(s) for s in zip(*self.steps[name], strict=True)
        )
        return f"{hash_ms:.3f} / {read_ms:.3f} / {score_ms:.3f}"


def run(client: redis.Redis, tokens: list[int], started_at: dict[str, int]) -> Runs:
    """Score the request ROUNDS times with each reader, interleaved so that both readers see the
    same machine noise."""
    candidates = frozenset(PODS)
    runs = Runs()
    for round_ in range(WARMUP + ROUNDS):
        for name, reader in READERS.items():
            started = time.perf_counter()
            result = score_request(
                client, MODEL, tokens, candidates, started_at, WEIGHTS, reader=reader
            )
            elapsed = (time.perf_counter() - started) * 1000
            if round_ >= WARMUP and result.timings:
                runs.times[name].append(elapsed)
                timings = result.timings
                runs.steps[name].append((timings.hash_ms, timings.read_ms, timings.score_ms))
            runs.results[name] = result
    assert runs.results["baseline"] == runs.results["kvadmin"], "the readers disagree"
    return runs


def report(title: str, runs: Runs) -> float:
    result = runs.results["kvadmin"]
    print(f"\n{title}: {result.n_blocks} blocks, longest match {result.longest_match},")
    print(f"  {len(result.pods)} pods scored, stale dropped: {', '.join(result.dropped_stale)}")
    print(f"  {'reader':10} {'p50 ms':>8} {'p99 ms':>8}   median hash / read / score ms")
    for name in READERS:
        p50, p99 = runs.p(name, 0.5), runs.p(name, 0.99)
        print(f"  {name:10} {p50:8.3f} {p99:8.3f}   {runs.median_steps(name)}")
    ratio = runs.p("baseline", 0.5) / runs.p("kvadmin", 0.5)
    ratio99 = runs.p("baseline", 0.99) / runs.p("kvadmin", 0.99)
    print(f"  kvadmin is {ratio:.1f}x faster at p50, {ratio99:.1f}x at p99")
    return ratio


def write_routing_state(client: redis.Redis, tokens: list[int], rng: random.Random) -> None:
    """The routing state of the module docstring, its times around Redis' clock; the
    speculative entries as routing writes them (scoring.route_record), lasting a million
    seconds."""
    blocks = block_hashes(tokens)
    for i, pod in enumerate(PODS[::4]):
        advance = RouteAdvance(MODEL, pod, f"spec-{i}", 0.0, blocks[:64], 10**6, 65536, 2.0, 1024)
        pipeline = client.pipeline(transaction=False)
        args = route_record.queue_record(pipeline, advance, None, 1000)
        route_record.finish(client, pipeline.execute(raise_on_error=False)[0], args)
    seconds, micros = client.time()
    now_ms = seconds * 1000 + micros // 1000
    pipeline = client.pipeline(transaction=False)
    for i, pod in enumerate(PODS):
        busy = now_ms + rng.randrange(0, 400) * 10**6  # far ahead: the state stays put
        pipeline.delete(queue_key(pod), in_flight_key(pod))
        pipeline.hset(queue_key(pod), mapping={"busy_until_ms": busy, "prefill_ms": 120.5})
        for n in range(10):
            pipeline.zadd(in_flight_key(pod), {f"d{i}-{n}": busy - n * 100})
        if i < 24:
            scraped_at = now_ms / 1000 + (10**6 if i < 16 else -60)
            load = {"running": 12, "waiting": i % 5, "kv_usage": 0.6, "scraped_at": scraped_at}
            pipeline.hset(load_key(pod), mapping=load)
    pipeline.execute()


def decide_kthena(client: redis.Redis, tokens: list[int], started_at: dict[str, int]) -> str:
    read = read_for_routing(client, MODEL, tokens, frozenset(PODS), started_at, WEIGHTS)
    first = read.blocks[0] if read.blocks else 0
    chosen, _ = choose(read.result.scores, PODS, first)
    return chosen or ""


def decide_ttft(
    client: redis.Redis,
    tokens: list[int],
    started_at: dict[str, int],
    parameters: TtftParameters = DEFAULT_PARAMETERS,
) -> str:
    state = StateRequest(MODEL, PODS, 2000)
    read = read_for_routing(
        client, MODEL, tokens, frozenset(PODS), started_at, WEIGHTS, state=state
    )
    assert read.state is not None
    cold = estimate_prefill(MODEL, len(tokens), (), 16, 0, WEIGHTS, parameters).seconds
    readings = {
        pod: load_reading(raw, read.state.now_ms, 3.0, cold, WEIGHTS_VERSION)
        for pod, raw in read.state.pods.items()
    }
    request = RouteRequest(
        model=MODEL,
        blocks=read.blocks,
        prompt_tokens=len(tokens),
        block_size=16,
        candidates=PODS,
        runs={pod.pod: pod.media_runs for pod in read.result.pods},
        scores=read.result.scores,
        speculative=speculative_blocks(read.state, read.blocks),
        loads={pod: reading.load for pod, reading in readings.items()},
        recent_work={pod: reading.recent_work_s for pod, reading in readings.items()},
    )
    return choose_pod(request, WEIGHTS, "ttft", parameters).chosen or ""


CALIBRATED = TtftParameters(
    pod_fits=tuple((pod, 0.01 + 0.001 * n, 5000.0 + 500 * n) for n, pod in enumerate(PODS))
)
"""Every pod with its own calibrated T0 and speed (issue 33): what each candidate's estimate
looks up beside the default parameters."""


def decide_ttft_calibrated(
    client: redis.Redis, tokens: list[int], started_at: dict[str, int]
) -> str:
    return decide_ttft(client, tokens, started_at, CALIBRATED)


def decision_paths(client: redis.Redis, tokens: list[int], started_at: dict[str, int]) -> list[str]:
    """Old and new decision path, interleaved as `run` does: the report's lines."""
    paths = {"kthena": decide_kthena, "ttft": decide_ttft, "calibrated": decide_ttft_calibrated}
    times: dict[str, list[float]] = {name: [] for name in paths}
    chosen: dict[str, str] = {}
    for round_ in range(WARMUP + ROUNDS):
        for name, decide in paths.items():
            started = time.perf_counter()
            chosen[name] = decide(client, tokens, started_at)
            elapsed = (time.perf_counter() - started) * 1000
            if round_ >= WARMUP:
                times[name].append(elapsed)
    lines = [
        "\ndecision path, conversation request, read + choose (no recording):",
        f"  {'policy':10} {'p50 ms':>8} {'p99 ms':>8}   chosen",
    ]
    for name in paths:
        p50, p99 = percentile(times[name], 0.5), percentile(times[name], 0.99)
        lines.append(f"  {name:10} {p50:8.3f} {p99:8.3f}   {chosen[name]}")
    ratio50 = percentile(times["ttft"], 0.5) / percentile(times["kthena"], 0.5)
    ratio99 = percentile(times["ttft"], 0.99) / percentile(times["kthena"], 0.99)
    lines.append(
        f"  ttft / kthena: {ratio50:.2f}x at p50, {ratio99:.2f}x at p99 "
        "(one round trip either way: the state rides in the walk script)"
    )
    calibrated50 = percentile(times["calibrated"], 0.5) / percentile(times["ttft"], 0.5)
    calibrated99 = percentile(times["calibrated"], 0.99) / percentile(times["ttft"], 0.99)
    lines.append(
        f"  ttft with every pod calibrated / ttft with the default parameters: "
        f"{calibrated50:.2f}x at p50, {calibrated99:.2f}x at p99 (the same round trip)"
    )
    return lines


SERVICE_ROUNDS = 12
SERVICE_CALLS = 20
"""Calls per case, tree and round (after a first round of warm-up)."""
CASES = [
    (request, policy, record)
    for request in ("conversation", "new conversation")
    for policy in ("kthena", "ttft")
    for record in (True, False)
]


class Tree:
    """One tree's service in its own process (bench/processes/service_worker.py)."""

    def __init__(self, name: str, tree: Path, env: dict[str, str], create: bool) -> None:
        self.name, self.tree = name, tree
        self.process = subprocess.Popen(
            [sys.executable, str(ROOT / "bench" / "processes" / "service_worker.py")],
            # In the tree's own directory: Celery's Django fixup puts the working directory
            # first on sys.path, and from this checkout's the other tree ran this one's scoring.
            cwd=tree,
            env=os.environ | {"TREE": str(tree)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        setup = {"env": env, "create": create, "model": MODEL, "pods": PODS}
        self.token = self._ask(setup)["token"]

    def _ask(self, message: dict) -> dict:
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())

    def calls(self, token_ids: list[int], policy: str, record: bool, n: int) -> list[float]:
        ask = {"token_ids": token_ids, "policy": policy, "record": record, "n": n}
        return self._ask(ask)["times"]

    def close(self) -> None:
        assert self.process.stdin
        self.process.stdin.close()
        self.process.wait(timeout=30)


def _posts(port: int, token: str, bodies: dict[str, bytes], n: int) -> dict[str, list[float]]:
    connection = http.client.HTTPConnection("127.0.0.1", port)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    times: dict[str, list[float]] = {name: [] for name in bodies}
    for name, body in bodies.items():
        for _ in range(n):
            started = time.perf_counter()
            connection.request("POST", "/api/v1/score", body, headers)
            answer = connection.getresponse()
            answer.read()
            times[name].append((time.perf_counter() - started) * 1000)
            assert answer.status == 200, answer.status
    connection.close()
    return times


def before_and_after(url: str, baseline: str, requests: dict[str, list[int]]) -> list[str]:
    """The service call and POST /api/v1/score of the `baseline` tree and of this one, in
    alternating rounds (the module docstring); the report's lines."""
    with tempfile.TemporaryDirectory() as work:
        workdir = Path(work)
        env = {
            "DJANGO_SETTINGS_MODULE": "kvadmin.settings",
            "REDIS_URL": url,
            "DATABASE_URL": f"sqlite://{workdir / 'bench.sqlite3'}",
            "KVADMIN_VAR_DIR": str(workdir),
            "SECRET_KEY": "bench-only-secret-key-bench-only-secret-key",
            "KVADMIN_DEMO": "0",
            "KVADMIN_LOG_LEVEL": "WARNING",
            # A shared machine stalls Redis for longer than a request path would wait.
            "REDIS_TIMEOUT_SECONDS": "10",
        }
        trees = {"after": Tree("after", ROOT, env, create=True)}
        trees["before"] = Tree("before", baseline_tree(baseline, workdir), env, create=False)
        token = trees["after"].token
        service: dict[tuple[str, str, tuple], list[float]] = {}
        for round_ in range(SERVICE_ROUNDS + 1):
            for name, tree in trees.items():
                for case in CASES:
                    request, policy, record = case
                    times = tree.calls(requests[request], policy, record, SERVICE_CALLS)
                    if round_:
                        service.setdefault((name, "service", case), []).extend(times)
        print("\n".join(_table(baseline, service, "service")), flush=True)
        client = redis.Redis.from_url(url, decode_responses=True)
        print("\n".join(floor(client, trees["after"], requests, service)), flush=True)
        client.close()
        servers = {
            name: start_server(name, os.environ | env, tree.tree) for name, tree in trees.items()
        }
        bodies = {
            f"{request}|{policy}": json.dumps(
                {"model": MODEL, "token_ids": tokens, "policy": policy}
            ).encode()
            for request, tokens in requests.items()
            for policy in ("kthena", "ttft")
        }
        try:
            for round_ in range(SERVICE_ROUNDS + 1):
                for name, server in servers.items():
                    times = _posts(server.port, token, bodies, SERVICE_CALLS)
                    if round_:
                        for key, found in times.items():
                            request, policy = key.split("|")
                            case = (request, policy, True)
                            service.setdefault((name, "http", case), []).extend(found)
        finally:
            for server in servers.values():
                server.process.terminate()
                server.process.wait(timeout=30)
            for tree in trees.values():
                tree.close()
    return _table(baseline, service, "http")


def ping_ms(client: redis.Redis) -> float:
    """This machine's round trip to Redis: the p50 of 1,000 PINGs, in ms."""
    pings = []
    for _ in range(1000):
        started = time.perf_counter()
        client.ping()
        pings.append((time.perf_counter() - started) * 1000)
    return percentile(pings, 0.5)


TARGETS = {"conversation": 0.3, "new conversation": 0.15}
"""Issue 36's targets for the recorded service call, as ratios to the tree before's p50."""


def server_ms(client: redis.Redis, calls: Callable[[], object], n: int) -> float:
    """Redis' own time per call of `calls`, which makes `n` (their scripts, the scripts'
    commands included), in ms: no client is at work but this one's."""
    client.config_resetstat()
    calls()
    stats = client.info("commandstats")
    return sum(v["usec"] for k, v in stats.items() if k.startswith("cmdstat_eval")) / n / 1000


def read_ms(client: redis.Redis, tokens: list[int], walk: bool, state: bool) -> float:
    """Redis' time for the service's read script on the request (the pods' restarts with the
    routing state), or for its parts: the walk alone, or the routing state alone."""
    keys, args = script_input(
        MODEL,
        block_hashes(tokens) if walk else [],
        set(PODS),
        {},
        {pod: rank_status_keys(pod, 1) for pod in PODS} if state else {},
        StateRequest(MODEL, PODS, 1000) if state else None,
    )
    return server_ms(client, lambda: [WALK(client, keys, args) for _ in range(500)], 500)


def floor(
    client: redis.Redis, after: "Tree", requests: dict[str, list[int]], service: dict
) -> list[str]:
    """The floor of a recorded decision on this design (the module docstring): the hashing
    of its blocks, the read script's and the recording's time in Redis, and two round trips
    (a PING's); the report's lines."""
    ping = ping_ms(client)
    lines = [
        "\nthe floor of a recorded decision on this design, before any Python of the decision "
        "itself, ms:",
        f"  {'request':17} {'policy':7} {'hash':>6} {'walk':>6} {'state':>6} {'read':>6} "
        f"{'record':>7} {'2 trips':>8} {'floor':>7} {'target':>7} {'floor/target':>13} "
        f"{'walk free':>10}",
    ]
    for request, tokens in requests.items():
        hashing = []
        for _ in range(200):
            started = time.perf_counter()
            block_hashes(tokens)
            hashing.append((time.perf_counter() - started) * 1000)
        hash_ms = percentile(hashing, 0.5)
        walk = read_ms(client, tokens, walk=True, state=False)
        state = read_ms(client, tokens, walk=False, state=True)
        read = read_ms(client, tokens, walk=True, state=True)
        for policy in ("kthena", "ttft"):
            # The service's calls: its read script, then its recording (what is left).
            recorded = server_ms(client, partial(after.calls, tokens, policy, True, 200), 200)
            record = max(recorded - read, 0.0)
            least = hash_ms + read + record + 2 * ping
            target = TARGETS[request] * statistics.median(
                service[("before", "service", (request, policy, True))]
            )
            lines.append(
                f"  {request:17} {policy:7} {hash_ms:6.3f} {walk:6.3f} {state:6.3f} "
                f"{read:6.3f} {record:7.3f} {2 * ping:8.3f} {least:7.3f} {target:7.3f} "
                f"{least / target:12.2f}x {(least - walk) / target:9.2f}x"
            )
    lines.append(
        "  walk: the walk alone; state: the pods' restarts and routing state alone; read: "
        "both, the one script the service calls; walk free: floor / target less the walk"
    )
    return lines


def _table(baseline: str, service: dict, kind: str) -> list[str]:
    """The lines of one kind of call ("service" or "http"), before and after."""
    lines = [
        f"\nthe decision path before ({baseline}) and after, {kind}, same run, p50 ms "
        f"({SERVICE_ROUNDS} alternating rounds of {SERVICE_CALLS} calls per case):",
        f"  {'request':17} {'policy':7} {'recorded':9} {'before':>8} {'after':>8} "
        f"{'after/before':>13}",
    ]
    for case in CASES:
        if (key := ("after", kind, case)) not in service:
            continue
        before = statistics.median(service[("before", kind, case)])
        after = statistics.median(service[key])
        request, policy, record = case
        lines.append(
            f"  {request:17} {policy:7} {'yes' if record else 'no':9} "
            f"{before:8.3f} {after:8.3f} {after / before:12.2f}x"
        )
    lines.append(f"  load average while measured: {os.getloadavg()[0]:.1f}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", default="main", help="the tree before (a git revision)")
    options = parser.parse_args()
    rng = random.Random(20261129)
    with RedisServer() as server:
        client = redis.Redis.from_url(server.url, decode_responses=True)
        tokens, started_at = build_index(client, rng)
        new_conversation = tokens[: 16 * SYSTEM_BLOCKS] + [
            rng.randrange(151_000) for _ in range(REQUEST_TOKENS - 16 * SYSTEM_BLOCKS)
        ]
        ping = ping_ms(client)
        client.config_resetstat()
        conversation = run(client, tokens, started_at)
        script_ms = client.info("commandstats")["cmdstat_evalsha"]["usec_per_call"] / 1000
        fresh = run(client, new_conversation, started_at)
        keys = client.dbsize()
        write_routing_state(client, tokens, rng)
        paths = decision_paths(client, tokens, started_at)
        requests = {"conversation": tokens, "new conversation": new_conversation}
        service = before_and_after(server.url, options.baseline, requests)
        client.close()

    print(f"index: {keys} keys, {len(PODS)} pods, model {MODEL}")
    print(f"{ROUNDS} scorings per reader and request, token ids to explained result")
    ratio = report("conversation so far (the target case)", conversation)
    p50 = conversation.p("kvadmin", 0.5)
    report("new conversation, same system prompt", fresh)
    print(
        f"\nfloor of this machine: PING round trip p50 {ping:.3f} ms; "
        f"mean server time of the walk script {script_ms:.3f} ms"
    )
    print(
        f"target: kvadmin p50 < 0.5 ms: {'met' if p50 < 0.5 else 'NOT met'} ({p50:.3f} ms); "
        f">= 3x baseline: {'met' if ratio >= 3 else 'NOT met'} ({ratio:.1f}x)"
    )
    print("\n".join(paths))
    print("\n".join(service))


if __name__ == "__main__":
    main()
