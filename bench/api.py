"""The scoring API and the live feed through the real ASGI server (uvicorn), in one run.

Run from the project root: `.venv/bin/python bench/api.py` (about a minute).

Setup: a private redis-server, a temporary SQLite database (migrated), an API token, 32
engines serving one model and an index where half of them hold the request's conversation to
various depths in GPU and CPU memory. Two uvicorn servers: one records every decision in the
decision log (the default), one does not (KVADMIN_DECISIONS_RECORD=0).

1. Scoring: POST /api/v1/score with 2,048 token ids (128 blocks) from 1, 8 and 32 concurrent
   keep-alive clients; requests/s and p50/p99 latency, alternating the two servers so both see
   the same machine load; the cost of recording is the difference. The same comparison
   in-process (`service.score(record=True)` against `record=False`, interleaved) shows the
   whole cost of recording, the round trip that carries the XADD and the scoring metrics,
   without the HTTP noise.
2. The feed: 10 logged-in websocket clients on /ws/feed/ while decisions are appended to the
   log at 1,000/s (synthetic, so the rate does not depend on the API's throughput): frames/s
   per client, decision-to-client latency of the rows shown (p50/p99, including the coalescing
   delay of up to 100 ms), rows not shown, and the web server's CPU.
"""

import asyncio
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import configure, percentile
from kvadmin.redis_server import RedisServer, free_port

MODEL = "Qwen/Qwen3-8B"
PODS = [f"vllm-{i}.inference" for i in range(32)]
REQUEST_TOKENS = 2048
CONCURRENCY = (1, 8, 32)
ROUNDS = 3
SECONDS_PER_RUN = 2.0
WARMUP_SECONDS = 0.5
FEED_CLIENTS = 10
FEED_RATE = 1000
FEED_SECONDS = 6.0


# Setup -----------------------------------------------------------------------------------------


def build(rng: random.Random) -> tuple[list[list[int]], str, str]:
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
    for i, pod in enumerate(PODS):
        Engine.objects.create(pod=pod, model=MODEL, events_endpoint=f"tcp://10.0.0.{i}:5557")
    token = ApiToken.issue("bench")[1]
    client = Client()
    client.force_login(get_user_model().objects.create_user("bench", password="pw-bench-123"))
    cookie = f"sessionid={client.cookies['sessionid'].value}"

    system = [rng.randrange(151_000) for _ in range(128)]
    requests = [system + [rng.randrange(151_000) for _ in range(1920)] for _ in range(4)]
    pipeline = index_client().pipeline(transaction=False)
    now = int(time.time())
    for n, tokens in enumerate(requests):
        blocks = block_hashes(tokens)
        for i, pod in enumerate(PODS[n * 8 : n * 8 + 8]):
            depth = 112 - 6 * i
            for position, block in enumerate(blocks[:depth]):
                medium = "GPU" if position < depth - 24 else "CPU"
                pipeline.hset(block_key(MODEL, block), pod, block_value(now - 60, medium))
    pipeline.execute()
    return requests, token, cookie


def start_server(env: dict[str, str], record: bool) -> tuple[subprocess.Popen, str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "kvadmin.asgi:application", "--host", "127.0.0.1",
         "--port", str(port), "--log-level", "warning", "--no-access-log"],
        cwd=ROOT,
        env=env | {"KVADMIN_DECISIONS_RECORD": "1" if record else "0"},
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            asyncio.run(_ping(port))
            return process, url
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                raise SystemExit("the ASGI server did not start") from None
            time.sleep(0.1)


async def _ping(port: int) -> None:
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.close()


# Scoring load ----------------------------------------------------------------------------------


async def _client(port: int, bodies: list[bytes], token: str, until: float, out: list) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (
        "POST /api/v1/score HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {token}\r\nContent-Length: "
    ).encode()
    n = 0
    while time.perf_counter() < until:
        body = bodies[n % len(bodies)]
        n += 1
        started = time.perf_counter()
        writer.write(head + b"%d\r\n\r\n" % len(body) + body)
        headers = await reader.readuntil(b"\r\n\r\n")
        length = int(re.search(rb"(?i)content-length: *(\d+)", headers).group(1))
        answer = await reader.readexactly(length)
        out.append(time.perf_counter() - started)
        if not headers.startswith(b"HTTP/1.1 200"):
            raise SystemExit(f"scoring failed: {headers[:12]!r} {answer[:200]!r}")
    writer.close()


async def _load(
    port: int, bodies: list[bytes], token: str, clients: int, seconds: float = SECONDS_PER_RUN
) -> list[float]:
    latencies: list[float] = []
    until = time.perf_counter() + seconds
    await asyncio.gather(*(_client(port, bodies, token, until, latencies) for _ in range(clients)))
    return latencies


def bench_scoring(servers: dict[str, str], bodies: list[bytes], token: str) -> None:
    print("\nPOST /api/v1/score, 2,048 token ids (128 blocks), 32 candidates, keep-alive clients")
    print(f"{'clients':>7}  {'server':<14} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8}")
    for clients in CONCURRENCY:
        results: dict[str, list[float]] = {name: [] for name in servers}
        elapsed: dict[str, float] = {name: 0.0 for name in servers}
        for url in servers.values():  # warm up: connections, scripts, caches
            asyncio.run(_load(urlsplit(url).port, bodies, token, clients, WARMUP_SECONDS))
        for _ in range(ROUNDS):
            for name, url in servers.items():
                started = time.perf_counter()
                results[name] += asyncio.run(_load(urlsplit(url).port, bodies, token, clients))
                elapsed[name] += time.perf_counter() - started
        p50s = {}
        for name, latencies in results.items():
            p50s[name] = percentile(latencies, 0.5) * 1000
            print(
                f"{clients:>7}  {name:<14} {len(latencies) / elapsed[name]:>8.0f} "
                f"{p50s[name]:>8.2f} {percentile(latencies, 0.99) * 1000:>8.2f}"
            )
        cost = (p50s["recording"] / p50s["not recording"] - 1) * 100
        print(f"{'':>7}  recording adds {cost:+.1f}% to the p50 latency (target: under 10%)")


def bench_recording_in_process(tokens: list[int]) -> None:
    from kvadmin.routing import service

    samples: dict[bool, list[float]] = {True: [], False: []}
    for record in (True, False) * 50:  # warm up
        service.score(MODEL, token_ids=tokens, record=record)
    for _ in range(40):
        for record in (True, False):
            for _ in range(25):
                started = time.perf_counter()
                service.score(MODEL, token_ids=tokens, record=record)
                samples[record].append(time.perf_counter() - started)
    with_, without = (percentile(samples[flag], 0.5) * 1000 for flag in (True, False))
    print(
        f"\nIn-process service.score, p50: {without:.3f} ms without recording, {with_:.3f} ms "
        f"with it ({(with_ / without - 1) * 100:+.1f}%: one pipelined XADD + metrics)"
    )


# The feed --------------------------------------------------------------------------------------

ROW_ID = re.compile(r'<details class="decision" id="d-(\w+)"')
NOT_SHOWN = re.compile(r"<p class=\"feed-gap\">(\d+) more not shown")


def _produce(template, published: dict[str, float], stop: threading.Event) -> None:
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
                template, id=f"bench{n}", ts=time.time(), request_id=f"b{n}", chosen=PODS[n % 32]
            )
            batch.append(record.id)
            pipeline.xadd(decisions.DECISIONS_KEY, {"d": decisions.encode(record)}, maxlen=10_000)
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


def bench_feed(process: subprocess.Popen, url: str, cookie: str, tokens: list[int]) -> None:
    from kvadmin.routing import service

    template = service.score(MODEL, token_ids=tokens, record=False)
    published: dict[str, float] = {}
    stats = [{"frames": 0, "rows": 0, "not_shown": 0, "latencies": []} for _ in range(FEED_CLIENTS)]

    async def run() -> float:
        until = time.monotonic() + FEED_SECONDS
        watchers = [
            asyncio.create_task(_watch(url, cookie, until, published, stat)) for stat in stats
        ]
        await asyncio.sleep(0.5)  # every socket open before the decisions start
        stop = threading.Event()
        producer = threading.Thread(target=_produce, args=(template, published, stop))
        cpu_before, wall_before = _cpu_seconds(process.pid), time.monotonic()
        producer.start()
        await asyncio.gather(*watchers)
        stop.set()
        producer.join()
        return (_cpu_seconds(process.pid) - cpu_before) / (time.monotonic() - wall_before)

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


def main() -> None:
    rng = random.Random(6)
    with RedisServer() as redis_server, tempfile.TemporaryDirectory() as workdir:
        env = configure(redis_server.url, Path(workdir))
        requests, token, cookie = build(rng)
        bodies = [json.dumps({"model": MODEL, "token_ids": tokens}).encode() for tokens in requests]
        servers: dict[str, str] = {}
        processes = []
        try:
            for name, record in (("not recording", False), ("recording", True)):
                process, url = start_server(env, record)
                processes.append(process)
                servers[name] = url
            bench_scoring(servers, bodies, token)
            bench_recording_in_process(requests[0])
            bench_feed(processes[1], servers["recording"], cookie, requests[0])
        finally:
            for process in processes:
                process.terminate()
                process.wait(timeout=15)


if __name__ == "__main__":
    main()
