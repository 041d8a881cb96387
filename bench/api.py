"""The scoring API through the real ASGI server (uvicorn): the lean path against the previous
Django path and against Django's own /healthz, in one run; then the live feed.

Run from the project root: `.venv/bin/python bench/api.py [--candidates N] [--seconds S]
[--baseline REV] [--before REV]` (about four minutes). Say how many cores the machine has and
what else ran beside it when quoting the figures: server, load generator and Redis share them.

Setup: a private redis-server, a temporary SQLite database (migrated), an API token, N
engines (default 8) serving one model and an index where half of them hold the requests'
conversations to various depths in GPU and CPU memory. Servers, each `uvicorn` on its own
port against the same Redis and database:
- "old": the tree at --baseline (default BASELINE_REV, the last commit that scored in
  Django's view), exported with `git archive`: the previous path, as the baseline;
- "before": the tree at --before (default BEFORE_REV), the lean path with the previous
  speculative layout (a ZSET per pod, ZMSCORE of every block on every candidate's), exported
  the same way: Redis CPU per decision before and after in the same run;
- "lean 1" and "lean N": this tree, one process and one per core (`--workers`, as make run);
- "healthz": Django's /healthz on the one-process server, the server's own ceiling for a
  request that goes through Django's middleware and touches nothing.

1. Scoring: POST /api/v1/score with 2,048 token ids (128 blocks) from 1, 8, 32 and 128
   keep-alive clients, spread over load-generator processes of their own; the servers take
   turns, round after round, so that all see the same machine. Decisions/s (200 answers),
   p50/p99 latency of answered requests, 503s (backpressure: clients wait the Retry-After),
   other failures. Redis' own CPU per decision is read from INFO between runs: when it is
   the ceiling, no HTTP layer can go faster.
2. Recording: the lean server beside the same tree with KVADMIN_DECISIONS_RECORD=0 and
   without the decision metrics (bench/unmetered.py) at 8 clients: the p50, web and Redis CPU
   per decision of each, so what the log and the metrics cost (the routing state is always
   written).
3. The feed: 10 logged-in websocket clients on /ws/feed/ while decisions are appended to the
   log at 1,000/s (synthetic, so the rate does not depend on the API's throughput): frames/s
   per client, decision-to-client latency of the rows shown (p50/p99, including the coalescing
   delay of up to 100 ms), rows not shown, and the web server's CPU.
"""

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import baseline_tree, configure, percentile
from kvadmin.redis_server import RedisServer, free_port
from scoring import keys

BASELINE_REV = "709bc81"
"""The last commit before the lean path: POST /api/v1/score in Django's view."""
BEFORE_REV = "e0959b9"
"""The last commit with a speculative ZSET per pod (issue 22)."""
MODEL = "Qwen/Qwen3-8B"
REQUEST_TOKENS = 2048
CONCURRENCY = (1, 8, 32, 128)
ROUNDS = 2
WARMUP_SECONDS = 0.5
GENERATORS = 4
"""Load-generator processes (at most one per client)."""
FEED_CLIENTS = 10
FEED_RATE = 1000
FEED_SECONDS = 6.0


# Setup -----------------------------------------------------------------------------------------


def build(rng: random.Random, pods: list[str]) -> tuple[list[list[int]], str, str]:
    """Database rows and the index; returns request bodies' token ids, an API token and a
    session cookie for the websocket clients."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from kvadmin.api.models import ApiToken
    from kvadmin.engines.models import Engine
    from kvadmin.redis_clients import index_client
    from scoring.hashing import block_hashes
    from scoring.keys import block_key, block_value

    call_command("migrate", verbosity=0)
    for i, pod in enumerate(pods):
        Engine.objects.create(pod=pod, model=MODEL, events_endpoint=f"tcp://10.0.0.{i}:5557")
    token = ApiToken.issue("bench")[1]
    client = Client()
    client.force_login(get_user_model().objects.create_user("bench", password="pw-bench-123"))
    cookie = f"sessionid={client.cookies['sessionid'].value}"

    system = [rng.randrange(151_000) for _ in range(128)]
    requests = [system + [rng.randrange(151_000) for _ in range(1920)] for _ in range(4)]
    pipeline = index_client().pipeline(transaction=False)
    now = int(time.time())
    holders = max(1, len(pods) // 8)
    for n, tokens in enumerate(requests):
        blocks = block_hashes(tokens)
        for i, pod in enumerate(pods[n * holders : (n + 1) * holders]):
            depth = 112 - 6 * i
            for position, block in enumerate(blocks[:depth]):
                medium = "GPU" if position < depth - 24 else "CPU"
                pipeline.hset(block_key(MODEL, block), pod, block_value(now - 60, medium))
    pipeline.execute()
    return requests, token, cookie


@dataclass
class Server:
    name: str
    process: subprocess.Popen
    url: str

    @property
    def port(self) -> int:
        return urlsplit(self.url).port or 80


ASGI_APP = "kvadmin.asgi:application"


def start_server(
    name: str, env: dict[str, str], cwd: Path, workers: int = 1, app: str = ASGI_APP
) -> Server:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", app, "--host", "127.0.0.1",
         "--port", str(port), "--log-level", "warning", "--no-access-log", "--lifespan", "off",
         "--workers", str(workers)],
        cwd=cwd,
        env=env | {"PYTHONPATH": str(cwd)},
        stderr=subprocess.DEVNULL,  # overload warnings: the table counts the failures
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180  # a loaded machine imports Django slowly
    while True:
        try:
            import urllib.request

            urllib.request.urlopen(f"{url}/healthz", timeout=2).read()
            return Server(name, process, url)
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                raise SystemExit(f"the {name} server did not start") from None
            time.sleep(0.2)


# The load generator ----------------------------------------------------------------------------


@dataclass
class Run:
    latencies: list[float] = field(default_factory=list)
    statuses: Counter = field(default_factory=Counter)
    seconds: float = 0.0

    def add(self, other: "Run") -> None:
        self.latencies += other.latencies
        self.statuses.update(other.statuses)


RETRY_AFTER = re.compile(rb"(?i)retry-after: *(\d+)")
BUSY = "503 busy"
"""Answered 503 by the lean path's backpressure (its Retry-After); other 503s are outages."""
CONTENT_LENGTH = re.compile(rb"(?i)content-length: *(\d+)")


async def _client(port: int, requests: list[bytes], until: float, run: Run) -> None:
    from kvadmin.api.fast_path import BUSY_RETRY_AFTER_SECONDS  # Django is set up by now

    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    n = random.randrange(len(requests))
    try:
        while time.perf_counter() < until:
            request = requests[n % len(requests)]
            n += 1
            started = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            await reader.readexactly(int(CONTENT_LENGTH.search(head).group(1)))
            status = int(head[9:12])
            if status == 200:
                run.latencies.append(time.perf_counter() - started)
            elif status == 503 and (wait := RETRY_AFTER.search(head)):
                seconds = int(wait.group(1))
                status = BUSY if seconds == BUSY_RETRY_AFTER_SECONDS else status
                await asyncio.sleep(min(seconds, max(0.0, until - time.perf_counter())))
            run.statuses[status] += 1
    except (OSError, asyncio.IncompleteReadError):
        run.statuses["connection lost"] += 1
    finally:
        writer.close()


def _generate(port: int, requests: list[bytes], clients: int, start: float, seconds: float, out):
    """One load-generator process: `clients` connections from `start` for `seconds`."""

    async def main() -> Run:
        run = Run()
        await asyncio.sleep(max(0.0, start - time.time()))
        until = time.perf_counter() + seconds
        await asyncio.gather(*(_client(port, requests, until, run) for _ in range(clients)))
        return run

    run = asyncio.run(main())
    out.send((run.latencies, dict(run.statuses)))


def load(server: Server, requests: list[bytes], clients: int, seconds: float) -> Run:
    """`clients` keep-alive clients over up to GENERATORS processes for `seconds`."""
    processes = min(GENERATORS, clients)
    shares = [clients // processes + (i < clients % processes) for i in range(processes)]
    start = time.time() + 0.3  # every process connected before the clock starts
    pipes, workers = [], []
    for share in shares:
        receiving, sending = multiprocessing.Pipe(duplex=False)
        worker = multiprocessing.Process(
            target=_generate, args=(server.port, requests, share, start, seconds, sending)
        )
        worker.start()
        pipes.append(receiving)
        workers.append(worker)
    total = Run(seconds=seconds)
    for receiving, worker in zip(pipes, workers, strict=True):
        latencies, statuses = receiving.recv()
        total.add(Run(latencies, Counter(statuses)))
        worker.join()
    return total


def score_requests(bodies: list[bytes], token: str) -> list[bytes]:
    return [
        b"POST /api/v1/score HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s"
        % (token.encode(), len(body), body)
        for body in bodies
    ]


HEALTHZ = [b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"]


# 1. Scoring ------------------------------------------------------------------------------------


def redis_cpu(client) -> float:
    info = client.info("cpu")
    return info["used_cpu_user"] + info["used_cpu_sys"]


def _processes(server: Server) -> set[int]:
    """The server's process and uvicorn's workers."""
    pid = server.process.pid
    processes = {pid}
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):  # a thread that just ended
            processes.update(int(child) for child in (task / "children").read_text().split())
    return processes


def server_cpu(server: Server) -> float:
    """CPU seconds of the server's processes (uvicorn's workers included). Unlike wall time,
    it hardly depends on what else the machine runs: 1 / (CPU per decision) is the rate one
    core could sustain."""
    total = 0.0
    for process in _processes(server):
        with contextlib.suppress(FileNotFoundError):
            total += _cpu_seconds(process)
    return total


def waited(processes: set[int]) -> float:
    """Seconds the processes' threads were ready to run but waited for a core (the kernel's
    schedstat): how much of the latency the machine, not the code, adds."""
    total = 0.0
    for process in processes:
        for task in Path(f"/proc/{process}/task").glob("*/schedstat"):
            with contextlib.suppress(FileNotFoundError):
                total += int(task.read_text().split()[1]) / 1e9
    return total


def bench_scoring(servers: list[Server], requests: list[bytes], seconds: float) -> dict:
    import redis as redis_py
    from django.conf import settings

    # Its own client: INFO may wait longer than the request path's timeout on a busy machine.
    redis = redis_py.Redis.from_url(settings.INDEX_REDIS_URL, socket_timeout=30)
    redis_pid = {redis.info("server")["process_id"]}
    print(f"\n{'clients':>7}  {'server':<9} {'answers/s':>9} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'busy':>6} {'failed':>6}   CPU ms per answer: {'server':>6} {'Redis':>6}"
          "   waited for a core, ms per answer: server Redis")  # fmt: skip
    figures: dict = {}
    for clients in CONCURRENCY:
        runs = {server.name: Run() for server in servers}
        redis_seconds = dict.fromkeys(runs, 0.0)
        web_seconds = dict.fromkeys(runs, 0.0)
        web_waited = dict.fromkeys(runs, 0.0)
        redis_waited = dict.fromkeys(runs, 0.0)
        for server in servers:  # warm up: connections, scripts, caches
            load(server, HEALTHZ if server.name == "healthz" else requests, clients, WARMUP_SECONDS)
        for _ in range(ROUNDS):
            for server in servers:
                before, web_before = redis_cpu(redis), server_cpu(server)
                waits = waited(_processes(server)), waited(redis_pid)
                run = load(server, HEALTHZ if server.name == "healthz" else requests, clients,
                           seconds)  # fmt: skip
                redis_seconds[server.name] += redis_cpu(redis) - before
                web_seconds[server.name] += server_cpu(server) - web_before
                web_waited[server.name] += waited(_processes(server)) - waits[0]
                redis_waited[server.name] += waited(redis_pid) - waits[1]
                runs[server.name].add(run)
                runs[server.name].seconds += run.seconds
        for name, run in runs.items():
            rate = run.statuses[200] / run.seconds
            p50, p99 = (percentile(run.latencies, q) * 1000 for q in (0.5, 0.99))
            other = sum(n for status, n in run.statuses.items() if status not in (200, BUSY))
            answered = max(1, run.statuses[200])
            per_redis = f"{redis_seconds[name] * 1000 / answered:.2f}" if name != "healthz" else "-"
            per_web = web_seconds[name] * 1000 / answered
            busy = run.statuses[BUSY]
            waits = web_waited[name] * 1000 / answered, redis_waited[name] * 1000 / answered
            print(f"{clients:>7}  {name:<9} {rate:>9.0f} {p50:>8.2f} {p99:>8.2f} "
                  f"{busy:>6} {other:>6} {per_web:>27.2f} {per_redis:>6}"
                  f"{waits[0]:>42.2f} {waits[1]:>5.2f}")  # fmt: skip
            if other:
                failed = {k: n for k, n in run.statuses.items() if k not in (200, BUSY)}
                print(f"{'':>18} failed: {failed}")
            redis_per = redis_seconds[name] * 1000 / answered if name != "healthz" else None
            figures[clients, name] = (rate, p50, p99, busy, other, per_web, redis_per)
    return figures


def ratios(figures: dict, servers: list[Server]) -> None:
    lean = [s.name for s in servers if s.name.startswith("lean")]
    print("\nRatios, same run:")
    for clients in CONCURRENCY:
        old = figures[clients, "old"][0]
        parts = [f"{name} / old = {figures[clients, name][0] / old:.1f}x" for name in lean]
        ceiling = figures[clients, "healthz"][0]
        parts += [f"{lean[-1]} / healthz = {figures[clients, lean[-1]][0] / ceiling:.2f}"]
        print(f"  {clients:>3} clients: decisions/s " + ", ".join(parts))
    for clients in CONCURRENCY:
        old = figures[clients, "old"][5]
        parts = [f"{name} {old / figures[clients, name][5]:.1f}x" for name in lean]
        print(f"  {clients:>3} clients: decisions per server CPU second, against old: "
              + ", ".join(parts))  # fmt: skip
    for column, what in ((5, "Web"), (6, "Redis")):
        for clients in CONCURRENCY:
            before, after = figures[clients, "before"][column], figures[clients, "lean 1"][column]
            print(f"  {clients:>3} clients: {what} CPU per decision, lean 1 / before = "
                  f"{after:.3f} / {before:.3f} ms = {after / before:.2f}")  # fmt: skip
    for name in lean:
        _, p50, p99, _, _, _, _ = figures[8, name]
        print(f"  {name}, 8 clients: p99 / p50 = {p99 / p50:.1f} (target: at most 3)")
    _, p50, p99, shed, other, _, _ = figures[128, lean[-1]]
    print(f"  {lean[-1]}, 128 clients: {other} failed (outages, errors), {shed} answered 503 "
          f"busy + Retry-After, p99 {p99:.1f} ms")  # fmt: skip


# 2. Recording ----------------------------------------------------------------------------------


def bench_recording(servers: list[Server], requests: list[bytes], seconds: float) -> None:
    """The lean server beside the same tree without the decision log and without the
    metrics, at 8 clients: what each costs per decision."""
    import redis as redis_py
    from django.conf import settings

    redis = redis_py.Redis.from_url(settings.INDEX_REDIS_URL, socket_timeout=30)
    runs = {server.name: Run() for server in servers}
    web = dict.fromkeys(runs, 0.0)
    redis_seconds = dict.fromkeys(runs, 0.0)
    for server in servers:
        load(server, requests, 8, WARMUP_SECONDS)
    for _ in range(ROUNDS):
        for server in servers:
            before, web_before = redis_cpu(redis), server_cpu(server)
            runs[server.name].add(load(server, requests, 8, seconds))
            redis_seconds[server.name] += redis_cpu(redis) - before
            web[server.name] += server_cpu(server) - web_before
    print("\nRecording, lean path, 8 clients (the routing state is written in every case):")
    print(f"  {'server':<12} {'p50 ms':>8}   CPU ms per decision: {'web':>5} {'Redis':>6}")
    for name, run in runs.items():
        answered = max(1, run.statuses[200])
        p50 = percentile(run.latencies, 0.5) * 1000
        print(f"  {name:<12} {p50:>8.2f} {web[name] * 1000 / answered:>26.3f} "
              f"{redis_seconds[name] * 1000 / answered:>6.3f}")  # fmt: skip


# 3. The feed -----------------------------------------------------------------------------------

ROW_ID = re.compile(r'<details class="decision" id="d-(\w+)"')
NOT_SHOWN = re.compile(r"<p class=\"feed-gap\">(\d+) more not shown")


def _produce(template, pods, published: dict[str, float], stop: threading.Event) -> None:
    """Append copies of a real decision (new ids, chosen pods cycling) at FEED_RATE per second."""
    import msgspec

    from kvadmin.redis_clients import index_client
    from kvadmin.routing import decisions

    client = index_client()
    n = 0
    started = time.monotonic()
    while not stop.is_set():
        due = int((time.monotonic() - started) * FEED_RATE)
        pipeline = client.pipeline(transaction=False)
        batch = []
        while n < due:
            record = msgspec.structs.replace(
                template,
                decision_id=f"bench{n}",
                ts=time.time(),
                request_id=f"b{n}",
                chosen=pods[n % len(pods)],
            )
            batch.append(record.decision_id)
            pipeline.xadd(keys.DECISIONS_KEY, {"d": decisions.encode(record)}, maxlen=10_000)
            n += 1
        if batch:
            pipeline.execute()
            now = time.monotonic()
            for decision_id in batch:
                published[decision_id] = now
        stop.wait(0.005)


async def _watch(url: str, cookie: str, until: float, published: dict, stats: dict) -> None:
    import websockets

    address = f"ws://{urlsplit(url).netloc}/ws/feed/"
    headers = {"Cookie": cookie, "Origin": url}
    async with websockets.connect(address, additional_headers=headers, max_size=None) as socket:
        await socket.recv()  # the opening frame
        while (left := until - time.monotonic()) > 0:
            try:
                frame = await asyncio.wait_for(socket.recv(), left)
            except TimeoutError:
                break
            arrived = time.monotonic()
            stats["frames"] += 1
            for decision_id in ROW_ID.findall(frame):
                if decision_id in published:
                    stats["latencies"].append(arrived - published[decision_id])
                stats["rows"] += 1
            stats["not_shown"] += sum(int(n) for n in NOT_SHOWN.findall(frame))


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench_feed(server: Server, cookie: str, tokens: list[int], pods: list[str]) -> None:
    from kvadmin.routing import service

    template = service.score(MODEL, token_ids=tokens, record=False)
    published: dict[str, float] = {}
    stats = [{"frames": 0, "rows": 0, "not_shown": 0, "latencies": []} for _ in range(FEED_CLIENTS)]

    async def run() -> float:
        until = time.monotonic() + FEED_SECONDS
        watchers = [
            asyncio.create_task(_watch(server.url, cookie, until, published, stat))
            for stat in stats
        ]
        await asyncio.sleep(0.5)  # every socket open before the decisions start
        stop = threading.Event()
        producer = threading.Thread(target=_produce, args=(template, pods, published, stop))
        pid = server.process.pid
        cpu_before, wall_before = _cpu_seconds(pid), time.monotonic()
        producer.start()
        await asyncio.gather(*watchers)
        stop.set()
        producer.join()
        return (_cpu_seconds(pid) - cpu_before) / (time.monotonic() - wall_before)

    cpu = asyncio.run(run())
    seconds = FEED_SECONDS - 0.5
    latencies = [latency for stat in stats for latency in stat["latencies"]]
    frames = [stat["frames"] / seconds for stat in stats]
    print(f"\nThe feed: {FEED_CLIENTS} websocket clients, decisions appended at {FEED_RATE}/s")
    print(f"  decisions appended      {len(published) / seconds:>8.0f} /s")
    print(f"  frames per client       {statistics.mean(frames):>8.1f} /s (max {max(frames):.1f})")
    rows = statistics.mean(stat["rows"] for stat in stats) / seconds
    hidden = statistics.mean(stat["not_shown"] for stat in stats) / seconds
    print(f"  rows shown per client   {rows:>8.0f} /s, counted as not shown {hidden:.0f} /s")
    print(
        f"  decision-to-client      p50 {percentile(latencies, 0.5) * 1000:.0f} ms, "
        f"p99 {percentile(latencies, 0.99) * 1000:.0f} ms (rows shown)"
    )
    print(f"  web server CPU          {cpu * 100:>8.0f} % of one core")


CONFIGURATIONS = {
    "speculative entries on (the default)": {},
    "speculative entries off (KVADMIN_ROUTING_SPECULATIVE_SECONDS=0)": {
        "KVADMIN_ROUTING_SPECULATIVE_SECONDS": "0"
    },
}
"""Speculative entries were most of Redis' time per decision before (ZMSCORE of the request's
blocks in each candidate's speculative ZSET, their ZADD for the chosen pod: the "before"
server); every server runs each configuration."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--candidates", type=int, default=8, help="engines serving the model")
    parser.add_argument("--seconds", type=float, default=1.5, help="per run and server")
    parser.add_argument("--baseline", default=BASELINE_REV, help="the previous path's commit")
    parser.add_argument("--before", default=BEFORE_REV, help="the previous layout's commit")
    options = parser.parse_args()
    pods = [f"vllm-{i}.inference" for i in range(options.candidates)]
    cores = os.cpu_count() or 1
    rng = random.Random(6)
    with RedisServer() as redis_server, tempfile.TemporaryDirectory() as scratch:
        workdir = Path(scratch)
        env = configure(redis_server.url, workdir)
        tokens, token, cookie = build(rng, pods)
        bodies = [json.dumps({"model": MODEL, "token_ids": t}).encode() for t in tokens]
        requests = score_requests(bodies, token)
        baseline = baseline_tree(options.baseline, workdir)
        before = baseline_tree(options.before, workdir)
        print(
            f"POST /api/v1/score: {REQUEST_TOKENS:,} token ids (128 blocks), {len(pods)} "
            f"candidates, keep-alive clients; {cores} cores shared by the servers, the load "
            f"generators ({GENERATORS} processes at most), Redis and whatever else runs"
        )
        for title, knobs in CONFIGURATIONS.items():
            print(f"\n== {title}")
            servers: list[Server] = []
            try:
                servers.append(start_server("old", env | knobs, baseline))
                servers.append(start_server("before", env | knobs, before))
                servers.append(lean := start_server("lean 1", env | knobs, ROOT))
                if cores > 1:
                    servers.append(start_server(f"lean {cores}", env | knobs, ROOT, cores))
                healthz = Server("healthz", lean.process, lean.url)
                figures = bench_scoring([*servers, healthz], requests, options.seconds)
                ratios(figures, servers)
                if not knobs:
                    silent = env | {"KVADMIN_DECISIONS_RECORD": "0"}
                    servers.append(start_server("no log", silent, ROOT))
                    servers.append(
                        start_server("no metrics", env, ROOT, app="bench.unmetered:application")
                    )
                    bench_recording([lean, *servers[-2:]], requests, options.seconds)
                    bench_feed(lean, cookie, tokens[0], pods)
            finally:
                for server in servers:
                    server.process.terminate()
                    server.process.wait(timeout=15)


if __name__ == "__main__":
    main()
