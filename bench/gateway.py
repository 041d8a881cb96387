"""The endpoint picker behind the real Envoy, against Envoy balancing on its own, in one run.

Run from the project root: `.venv/bin/python bench/gateway.py [--seconds S] [--baseline REV]
[--only latency|long|load]` (a few minutes; `--only latency` runs 1. and 4. alone, in
seconds, `--only long` 2., `--only load` 3.).
Say how many cores the machine has and its load average when quoting the figures: Envoy, the
picker, the pods, Redis and the load generators share them.

Setup: a private redis-server, a temporary SQLite database, a Celery worker ingesting the
pods' KV events, 4 simulated pods (`manage.py simulate --register`, DeepSeek V4's real
tokenizer, registered with serving addresses and that tokenizer, so the picker tokenizes
locally), one picker (`manage.py endpoint_picker`) and three Envoys from the shipped config:
"picker" (ext_proc to the picker), "round robin" and "least request" (no ext_proc, Envoy's
own policy). Configurations take turns, round after round, so that all see the same machine.

1. Added latency: short completions (about 100 tokens) to instant pods from 1 and 8
   keep-alive clients: p50/p99 through the picker against round robin.
2. Long prompts: about 220 KB of text each (8 documents, a question each), streamed, from 20
   and 100 clients, instant pods: p50/p99 time to first byte of the body, requests/s, and
   the CPU each gateway's Envoy and picker spent per request. Every table also gives the
   hit rate the pods delivered, their queue wait, the busiest pod's requests over the mean,
   and what the picker (degraded choices and why, outcomes recorded) and its Envoy
   (requests passed without the picker, retries) counted.
3. TTFT under load: timed pods (`--time-scale 1`: scoring.ttft's default prefill speed, so a
   hit saves most of a request's time) of 512 GPU blocks, fewer than the workload's prefixes
   need, so where a request goes decides its hit. The workload is the demo's
   (kvadmin/fleet/workload.py: shared system prompts, multi-turn chats, 10% cold one-offs),
   a trace of its own per gateway and round. The fleet's capacity is measured on it (16
   keep-alive clients through least request); open loop (Poisson arrivals) at 0.5 and 0.8 of
   it: p90 TTFT through the picker (`ttft` policy), round robin and least request.
4. Decisions per CPU second: the picker process's CPU per routed request in 1., against the
   web server's per decision for POST /api/v1/score (the lean path) with the same bodies.

1. and 2. also go through an "ext_proc floor" gateway: the shipped config in front of a picker
that does nothing (bench/processes/null_picker.py: no reading, no decision, no recording, the
next pod round robin). What it adds is what any picker on grpcio's asyncio server adds behind
this config before doing any work.

With `--baseline REV` (e.g. main), every part also runs a second picker from REV's tree
(exported with `git archive`) behind an Envoy of its own, in the same turns: this tree's
picker against REV's, as ratios (2.: also each picker's and Envoy's CPU per request; 3.: its
p90 against least request's too). In 3. both pickers read and teach the same pods' queues
and corrections in Redis, in turns: what one delivered corrects the other's next
predictions, as two picker processes of one gateway share them.
"""

import argparse
import asyncio
import contextlib
import itertools
import json
import math
import multiprocessing
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.api import (  # noqa: E402
    _cpu_seconds,
    baseline_tree,
    score_requests,
    server_cpu,
    start_server,
)
from bench.harness import configure, percentile  # noqa: E402
from kvadmin.gateway import READY_LINE as PICKER_READY  # noqa: E402
from kvadmin.redis_server import RedisServer, free_port, free_ports  # noqa: E402

MODEL = "deepseek-ai/DeepSeek-V4-Flash"
PODS = 4
ROUNDS = 2
GENERATORS = 2
INSTANT_GPU_BLOCKS = 2048
TIMED_GPU_BLOCKS = 512
"""Fewer than the workload's prefixes need: where a request goes decides its hit."""
LONG_WINDOW = 2048
"""The instant pods tokenize and cache only a prompt's first this many tokens, what the
picker reads of it (BLOCK_SIZE * MAX_BLOCKS): a 220 KB prompt costs them little, so 2.
measures the gateway, not the pods (kvadmin/fleet/prompt_window.py)."""
LOAD_SECONDS = 4
"""3.'s runs are this many times --seconds: enough arrivals for a p90."""
WORDS = ("cache", "block", "prefix", "tier", "engine", "router", "token", "pod", "queue")


def documents(rng: random.Random, count: int, size: int) -> list[str]:
    return [
        " ".join(rng.choice(WORDS) + str(rng.randrange(100)) for _ in range(size // 7))
        for _ in range(count)
    ]


def completion(prompt: str, stream: bool = False, max_tokens: int = 4) -> bytes:
    body = {"model": MODEL, "prompt": prompt, "max_tokens": max_tokens}
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    return json.dumps(body).encode()


def http_request(body: bytes, path: str = "/v1/completions") -> bytes:
    return (
        b"POST %s HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (path.encode(), len(body), body)
    )


# The load generator ---------------------------------------------------------------------------


@dataclass
class Run:
    ttfb: list[float] = field(default_factory=list)
    """Seconds to the first byte of the body (the first chunk: TTFT for a streamed answer)."""
    total: list[float] = field(default_factory=list)
    statuses: Counter = field(default_factory=Counter)
    seconds: float = 0.0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    """The pods' usage of the answers: cached / prompt is the hit rate delivered."""
    pods: Counter = field(default_factory=Counter)
    """Answers by the pod that served them (the simulated pods name themselves)."""
    queued: list[float] = field(default_factory=list)
    """Seconds each answered request waited in its pod's prefill queue (timed pods)."""

    def add(self, other: "Run") -> None:
        self.ttfb += other.ttfb
        self.total += other.total
        self.statuses.update(other.statuses)
        self.prompt_tokens += other.prompt_tokens
        self.cached_tokens += other.cached_tokens
        self.pods.update(other.pods)
        self.queued += other.queued

    def served(self, body: bytes) -> None:
        """What the pod's answer says of itself: its usage, its name, its queue wait."""
        for name, pattern in _ANSWER_FIELDS.items():
            found = pattern.findall(body)
            if not found:
                continue
            value = found[-1]
            if name == "pod":
                self.pods[value.decode()] += 1
            elif name == "queued_ms":
                self.queued.append(float(value) / 1000)
            else:
                setattr(self, name, getattr(self, name) + int(value))


_ANSWER_FIELDS = {
    "prompt_tokens": re.compile(rb'"prompt_tokens":\s*(\d+)'),
    "cached_tokens": re.compile(rb'"cached_tokens":\s*(\d+)'),
    "pod": re.compile(rb'"pod":\s*"([^"]+)"'),
    "queued_ms": re.compile(rb'"queued_ms":\s*([0-9.]+)'),
}


async def _exchange(reader, writer, request: bytes, run: Run) -> None:
    started = time.perf_counter()
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    first = None
    lowered = head.lower()
    last = b""
    if b"transfer-encoding: chunked" in lowered:
        while True:
            size = int((await reader.readline()).strip(), 16)
            data = await reader.readexactly(size + 2)
            if first is None:
                first = time.perf_counter()
            if size == 0:
                break
            if b'"usage"' in data:
                last = data
    else:
        length = int(lowered.split(b"content-length:")[1].split(b"\r\n")[0])
        last = await reader.readexactly(length)
        first = time.perf_counter()
    if status == 200:
        run.ttfb.append(first - started)
        run.total.append(time.perf_counter() - started)
        run.served(last)
    run.statuses[status] += 1


async def _closed_loop(
    port: int, requests: list[bytes], turns: Iterator[int], until: float, run: Run
) -> None:
    """One keep-alive client; each request is the next of `requests` the clients of this
    process have not sent (a trace keeps its order: a conversation's turns come in turn)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while time.perf_counter() < until:
            await _exchange(reader, writer, requests[next(turns) % len(requests)], run)
    except (OSError, asyncio.IncompleteReadError, ValueError):
        run.statuses["connection lost"] += 1
    finally:
        writer.close()


async def _one(port: int, request: bytes, run: Run) -> None:
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        await _exchange(reader, writer, request, run)
        writer.close()
    except (OSError, asyncio.IncompleteReadError, ValueError):
        run.statuses["connection lost"] += 1


async def _open_loop(port: int, requests: list[bytes], rate: float, until: float, run: Run):
    """Poisson arrivals at `rate` per second, each on a connection of its own."""
    rng, tasks, n = random.Random(port), [], 0
    while time.perf_counter() < until:
        tasks.append(asyncio.ensure_future(_one(port, requests[n % len(requests)], run)))
        n += 1
        await asyncio.sleep(rng.expovariate(rate))
    await asyncio.gather(*tasks)


def _generate(port, requests, clients, rate, start, seconds, out) -> None:
    async def main() -> Run:
        run = Run()
        await asyncio.sleep(max(0.0, start - time.time()))
        until = time.perf_counter() + seconds
        if rate:
            await _open_loop(port, requests, rate, until, run)
        else:
            turns = itertools.count()
            await asyncio.gather(
                *(_closed_loop(port, requests, turns, until, run) for _ in range(clients))
            )
        return run

    run = asyncio.run(main())
    out.send(run)


def load(port: int, requests: list[bytes], seconds: float, clients: int = 0, rate: float = 0):
    """`clients` keep-alive clients (closed loop), or arrivals at `rate` (open loop)."""
    processes = 1 if rate else min(GENERATORS, clients)
    shares = [clients // processes + (i < clients % processes) for i in range(processes)]
    start = time.time() + 0.3
    pipes, workers = [], []
    for i, share in enumerate(shares):
        receiving, sending = multiprocessing.Pipe(duplex=False)
        part = requests[i::processes]  # each process its share of the trace, in order
        worker = multiprocessing.Process(
            target=_generate, args=(port, part, share, rate, start, seconds, sending)
        )
        worker.start()
        pipes.append(receiving)
        workers.append(worker)
    total = Run(seconds=seconds)
    for receiving, worker in zip(pipes, workers, strict=True):
        total.add(receiving.recv())
        worker.join()
    return total


# The rig --------------------------------------------------------------------------------------


def events_ports() -> int:
    """The first of PODS events ports whose replay ports (REPLAY_PORT_OFFSET above) are free
    too: a pod binds both, and a replay port taken by another process kills the fleet."""
    from kvadmin.fleet.fleet import REPLAY_PORT_OFFSET

    while True:
        first = free_ports(PODS)
        if free_ports_at(first + REPLAY_PORT_OFFSET):
            return first


def free_ports_at(first: int) -> bool:
    try:
        with contextlib.ExitStack() as held:
            for port in range(first, first + PODS):
                held.enter_context(socket.create_server(("127.0.0.1", port)))
    except OSError:
        return False
    return True


@dataclass
class Rig:
    env: dict[str, str]
    workdir: Path
    processes: list[subprocess.Popen] = field(default_factory=list)
    admins: dict[int, int] = field(default_factory=dict)
    """Each Envoy's admin port by its listener's."""
    envoys: dict[int, subprocess.Popen] = field(default_factory=dict)
    """Each Envoy's process by its listener's port."""
    metrics: dict[str, int] = field(default_factory=dict)
    """Each picker's metrics port by the name of the gateway in front of it."""

    def spawn(self, *command: str, ready: str | None = None, cwd: Path = ROOT) -> subprocess.Popen:
        log = (self.workdir / f"{len(self.processes)}.log").open("w")
        process = subprocess.Popen(
            list(command), cwd=cwd, env=self.env | {"PYTHONPATH": str(cwd)}, text=True,
            stdout=subprocess.PIPE if ready else log, stderr=log,
        )  # fmt: skip
        self.processes.append(process)
        if ready:
            assert process.stdout is not None
            for line in process.stdout:
                if line.startswith(ready):
                    break
            else:
                log.flush()
                raise SystemExit(f"{command[:3]} exited:\n{Path(log.name).read_text()[-3000:]}")
        return process

    def fleet(
        self, time_scale: float, gpu_blocks: int, prompt_window: int = 0
    ) -> tuple[subprocess.Popen, list[str]]:
        """4 registered pods on free ports; their process and serving addresses."""
        from kvadmin.fleet.fleet import READY_LINE

        http_port, base_port = free_ports(PODS), events_ports()
        process = self.spawn(
            sys.executable, "manage.py", "simulate", "--pods", str(PODS), "--kind", "vllm",
            "--model", MODEL, "--tokenizer", "deepseek-v4", "--register",
            "--http-port", str(http_port), "--base-port", str(base_port),
            "--time-scale", str(time_scale), "--decode-seconds", "0.5",
            "--gpu-blocks", str(gpu_blocks), "--max-model-len", "262144",
            "--prompt-window", str(prompt_window), ready=READY_LINE,
        )  # fmt: skip
        return process, [f"127.0.0.1:{http_port + i}" for i in range(PODS)]

    def envoy(self, pods: list[str], picker: str, balancing: str, tree: Path = ROOT) -> int:
        """An Envoy from the shipped config of `tree` (a baseline picker's own)."""
        from kvadmin.gateway import envoy

        port, admin = free_port(), free_port()
        source = tree / envoy.SHIPPED.relative_to(ROOT)
        config = envoy.render(
            f"127.0.0.1:{port}", f"127.0.0.1:{admin}", [picker], pods, balancing, source=source
        )
        self.admins[port] = admin
        path = envoy.write(config, self.workdir / f"envoy-{port}.yaml")
        self.envoys[port] = self.spawn(
            envoy.binary(), "-c", str(path), "--concurrency", "2", "-l", "error",
            "--disable-hot-restart",
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            try:
                body = completion("warm up")
                request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body)
                if urllib.request.urlopen(request, timeout=5).status == 200:
                    return port
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit(f"envoy ({balancing}) did not serve") from None
                time.sleep(0.5)

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.terminate()
        for process in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=15)

    def picker(self, metrics_port: int, cwd: Path = ROOT) -> tuple[subprocess.Popen, str]:
        """A picker process (of the tree `cwd`) and its address."""
        port = free_port()
        process = self.spawn(
            sys.executable, "manage.py", "endpoint_picker", "--port", str(port),
            "--metrics-port", str(metrics_port), ready=PICKER_READY, cwd=cwd,
        )  # fmt: skip
        return process, f"127.0.0.1:{port}"


PICKER_METRICS = free_port()
FLOOR = "ext_proc floor"
"""The gateway whose picker does nothing (bench/processes/null_picker.py), in 1. and 2."""


PICKER_COUNTERS = {
    "answers": 'kvadmin_picker_requests_total{answer="',
    "degraded": 'kvadmin_picker_degraded_total{reason="',
    "outcomes": 'kvadmin_picker_outcomes_total{result="',
}


def picker_counters(port: int = PICKER_METRICS) -> dict[str, Counter]:
    """The picker's counters since it started: its answers (routed, degraded...), why its
    choices were degraded, what became of the outcomes (recorded: the wait correction and
    calibration learn from them)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
    found = {name: Counter() for name in PICKER_COUNTERS}
    for line in text.decode().splitlines():
        for name, prefix in PICKER_COUNTERS.items():
            if line.startswith(prefix):
                found[name][line[len(prefix) :].split('"')[0]] = int(float(line.split()[-1]))
    return found


ENVOY_STATS = (
    "ext_proc.failure_mode_allowed",
    "ext_proc.message_timeouts",
    "upstream_rq_retry",
    "ext_proc.stream_msgs_sent",
)
"""The last: ext_proc messages Envoy sent the picker (each a gRPC round trip)."""


def envoy_stats(admin: int) -> Counter:
    """The Envoy's requests that went on without the picker's answer (failure_mode_allow:
    Envoy's round robin placed them) and its retries (a refused or reset pod: the next
    endpoint the picker named)."""
    url = f"http://127.0.0.1:{admin}/stats?filter=ext_proc|upstream_rq_retry"
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    found = Counter()
    for line in text.splitlines():
        name, _, value = line.partition(": ")
        for stat in ENVOY_STATS:
            if name.endswith(stat) and value.strip().isdigit():
                found[stat] += int(value)
    return found


def since(now: dict[str, Counter], before: dict[str, Counter]) -> str:
    return "; ".join(
        f"{name} {dict(+(now[name] - before[name]))}" for name in now if +(now[name] - before[name])
    )


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.1f}"


Trace = Callable[[str, int], list[bytes]]
"""The requests a gateway is sent in a round (-1: the warm-up)."""


def same(requests: list[bytes]) -> Trace:
    return lambda name, turn: requests


def compare(
    title: str, rig: Rig, gateways: dict[str, int], trace: Trace, seconds: float, **how
) -> dict[str, Run]:
    """Each gateway ROUNDS times, in turns; prints p50/p99 (and p90) of the first byte, the
    hit rate the pods delivered, their queue wait, how evenly the requests spread (the
    busiest pod's over the mean), and what each picker and its Envoy counted meanwhile."""
    runs = {name: Run() for name in gateways}
    for name, port in gateways.items():  # warm: tokenizers loaded, connections open
        load(port, trace(name, -1), 1.0, **how)
    watched = {name: port for name, port in rig.metrics.items() if name in gateways}

    def counted() -> dict[str, dict[str, Counter]]:
        return {
            name: picker_counters(port) | {"envoy": envoy_stats(rig.admins[gateways[name]])}
            for name, port in watched.items()
        }

    before = counted()
    for turn in range(ROUNDS):
        for name, port in gateways.items():
            runs[name].add(load(port, trace(name, turn), seconds, **how))
            runs[name].seconds += seconds
    now = counted()
    print(f"\n{title}")
    for name in watched:
        print(f"   meanwhile, {name} and its Envoy: {since(now[name], before[name])}")
    print(
        f"{'':>14} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'req/s':>7} {'hits':>5} "
        f"{'queue ms':>8} {'max/mean':>8}  statuses"
    )
    for name, run in runs.items():
        hits = run.cached_tokens / max(run.prompt_tokens, 1)
        spread = max(run.pods.values(), default=0) / max(len(run.ttfb) / PODS, 1)
        queue = sum(run.queued) / max(len(run.queued), 1)
        print(
            f"{name:>14} {ms(percentile(run.ttfb, 0.5))} {ms(percentile(run.ttfb, 0.9))} "
            f"{ms(percentile(run.ttfb, 0.99))} {len(run.ttfb) / run.seconds:7.1f} {hits:5.2f} "
            f"{ms(queue)} {spread:8.2f}  {dict(run.statuses)}"
        )
    return runs


def added(runs: dict[str, Run], fraction: float, picker: str = "picker") -> float:
    """The picker's percentile less round robin's, ms."""
    ours, theirs = runs[picker].ttfb, runs["round robin"].ttfb
    return (percentile(ours, fraction) - percentile(theirs, fraction)) * 1000


def baselines(pickers: dict[str, subprocess.Popen]) -> list[str]:
    """The names of the pickers of other trees (`--baseline`)."""
    return [name for name in pickers if name not in ("picker", FLOOR)]


def bench_latency(
    rig: Rig, gateways: dict[str, int], pickers: dict[str, subprocess.Popen], seconds: float
) -> float:
    """1.; returns this tree's picker's CPU seconds per routed request at 8 clients. With a
    baseline picker, each picker's figures against it."""
    short = [http_request(completion(body)) for body in short_prompts()]
    cpu: dict[str, float] = {}
    for clients in (1, 8):
        before = {name: _cpu_seconds(process.pid) for name, process in pickers.items()}
        title = f"1. added latency, short completions, {clients} client(s)"
        runs = compare(title, rig, gateways, same(short), seconds, clients=clients)
        for name, process in pickers.items():
            spent = _cpu_seconds(process.pid) - before[name]
            cpu[name] = spent / max(len(runs[name].ttfb), 1)
            print(
                f"   added by {name}: p50 {added(runs, 0.5, name):.1f} ms, "
                f"p99 {added(runs, 0.99, name):.1f} ms; {1 / cpu[name]:.0f} requests per "
                "CPU second"
            )
        for base in baselines(pickers):
            ratios = (
                f"{added(runs, q) / added(runs, q, base):.2f}" if added(runs, q, base) else "-"
                for q in (0.5, 0.99)
            )
            print(
                f"   picker / {base}: added p50 {next(ratios)}, added p99 {next(ratios)}, "
                f"CPU per request {cpu['picker'] / cpu[base]:.2f}"
            )
    return cpu["picker"]


def short_prompts() -> list[str]:
    rng = random.Random(1)
    return [f"{d} question {n}" for n, d in enumerate(documents(rng, 16, 500))]


def bench_api_cpu(env: dict[str, str], token: str, picker_cpu: float, seconds: float) -> None:
    """4.: the lean score API at 8 clients, the same prompts."""
    web = start_server("lean", env, ROOT)
    try:
        bodies = [json.dumps({"model": MODEL, "prompt": p}).encode() for p in short_prompts()]
        requests = score_requests(bodies, token)
        load(web.port, requests, 1.0, clients=8)  # warm
        before = server_cpu(web)
        api = load(web.port, requests, seconds * ROUNDS, clients=8)
        api_cpu = (server_cpu(web) - before) / max(len(api.ttfb), 1)
    finally:
        web.process.terminate()
        web.process.wait(timeout=15)
    print(
        f"\n4. decisions per CPU second: picker {1 / picker_cpu:.0f} (a routed request, its "
        f"outcome included), lean score API {1 / api_cpu:.0f} ({len(api.ttfb)} decisions, "
        f"{dict(api.statuses)}): picker / API {api_cpu / picker_cpu:.2f}"
    )


LONG_REQUESTS = 192
"""Requests of a long-prompt trace, each with a question of its own."""


def long_prompts(clients: int) -> Trace:
    """2.'s trace for a gateway's round: 8 documents of about 220 KB, each request one of them
    and a question no other request of the run asks: no prompt is in the picker's token cache,
    which keys on the whole prompt, but a document's scoring window is tokenized once, by the
    picker (`routing.local_tokenize.WINDOWS`) as by the near-instant pods."""
    texts = documents(random.Random(2), 8, 220_000)
    asked = itertools.count()

    def trace(name: str, turn: int) -> list[bytes]:
        return [
            http_request(
                completion(f"{texts[n % 8]} question {clients}.{next(asked)}", stream=True)
            )
            for n in range(LONG_REQUESTS)
        ]

    return trace


def bench_long(
    rig: Rig, gateways: dict[str, int], pickers: dict[str, subprocess.Popen], seconds: float
) -> None:
    """2.; with a baseline picker, this tree's picker against it: added p50/p99, requests/s
    (at 100 clients, where the gateways saturate) and CPU per request, as ratios. The CPU is
    each gateway's own processes' (its picker's, its Envoy's) over its answered requests;
    the pods and the clients are shared."""
    processes = {name: [rig.envoys[port]] for name, port in gateways.items()}
    for name, picker in pickers.items():
        processes[name].append(picker)
    for clients in (20, 100):
        title = f"2. ~220 KB prompts, streamed, {clients} clients (time to first chunk)"
        before = {name: [_cpu_seconds(p.pid) for p in ps] for name, ps in processes.items()}
        runs = compare(title, rig, gateways, long_prompts(clients), seconds, clients=clients)
        cpu = {
            name: [
                (_cpu_seconds(p.pid) - was) / max(len(runs[name].ttfb), 1) * 1000
                for p, was in zip(ps, before[name], strict=True)
            ]
            for name, ps in processes.items()
        }
        for name in runs:
            envoy_ms, *picker_ms = cpu[name]
            spent = f"CPU per request: Envoy {envoy_ms:.1f} ms"
            if name == "round robin":
                print(f"   round robin: {spent}")
                continue
            print(
                f"   added by {name}: p50 {added(runs, 0.5, name):.1f} ms, p99 "
                f"{added(runs, 0.99, name):.1f} ms; {spent}, picker {picker_ms[0]:.1f} ms"
            )
        for base in baselines(pickers):
            ratios = [
                f"{added(runs, q) / added(runs, q, base):.2f}" if added(runs, q, base) else "-"
                for q in (0.5, 0.99)
            ]
            rate = len(runs["picker"].ttfb) / max(len(runs[base].ttfb), 1)
            print(
                f"   picker / {base}: added p50 {ratios[0]}, added p99 {ratios[1]}, requests/s "
                f"{rate:.2f}, picker CPU per request {cpu['picker'][1] / cpu[base][1]:.2f}"
            )


def conversations(seed: int, count: int) -> list[bytes]:
    """`count` requests of the demo's traffic (kvadmin/fleet/workload.py), in order: 12 groups
    of 8 users behind long system prompts (200-800 words), multi-turn chats whose prompt grows
    by a reply and a question each turn, 10% cold one-off completions. Each reply is fed back,
    so a conversation's next turn extends its last prompt, as a chat client's does."""
    from kvadmin.fleet.workload import Workload

    workload, rng = Workload(MODEL, seed=seed), random.Random(seed)
    trace = []
    for _ in range(count):
        request = workload.next_request()
        trace.append(http_request(json.dumps(request.body).encode(), request.path))
        workload.record_reply(request, " ".join(rng.choice(WORDS) for _ in range(8)))
    return trace


def bench_load(rig: Rig, gateways: dict[str, int], seconds: float) -> None:
    """3. Every gateway's every round gets a trace of its own (its own system prompts and
    users): none finds what another's requests left in the pods' caches. The capacity is
    measured, on this workload: the requests/s the fleet answers with every pod's queue full
    (4 keep-alive clients per pod) through Envoy's least request, the baseline."""
    names = list(gateways)
    saturated = load(
        gateways["least request"], conversations(99, 400 * round(seconds)), seconds * 2,
        clients=4 * PODS,
    )  # fmt: skip
    capacity = len(saturated.ttfb) / (seconds * 2)
    hits = saturated.cached_tokens / max(saturated.prompt_tokens, 1)
    print(
        f"\n3. capacity measured: {capacity:.1f} requests/s ({PODS} pods, {4 * PODS} clients "
        f"through least request, hits {hits:.2f}, {dict(saturated.statuses)})"
    )
    for fraction in (0.5, 0.8):
        rate = fraction * capacity
        length = round(rate * seconds * LOAD_SECONDS * 2) + 100

        def trace(name: str, turn: int, length: int = length) -> list[bytes]:
            return conversations(100 * (turn + 2) + names.index(name), length)

        title = f"3. TTFT at {fraction} of capacity ({rate:.1f} requests/s, open loop)"
        started = time.time()
        runs = compare(title, rig, gateways, trace, seconds * LOAD_SECONDS, rate=rate)
        prediction(started)
        p90 = {name: percentile(run.ttfb, 0.9) for name, run in runs.items()}
        for picker in (name for name in runs if name.startswith("picker")):
            print(
                f"   {picker} p90 / least request p90: "
                f"{p90[picker] / p90['least request']:.2f}, "
                f"/ round robin p90: {p90[picker] / p90['round robin']:.2f}"
            )


def prediction(since: float) -> None:
    """The picker's predicted TTFT against the delivered one for its requests since `since`
    (the outcomes it recorded): the error, and predicted / delivered for requests that were
    mostly hits and mostly misses (a bias that differs between them is the prefill model's),
    then each pod's delivered corrections as the next decision reads them."""
    from kvadmin.redis_clients import index_client
    from kvadmin.routing.prediction_error import delivered
    from scoring.keys import queue_key

    client = index_client()
    found = delivered(client, 100_000, since=since)
    if not found:
        return
    errors = [item.error for item in found]
    hits = [i for i in found if i.cached_tokens >= i.prompt_tokens / 2]
    misses = [i for i in found if i.cached_tokens < i.prompt_tokens / 2]

    def ratio(items: list) -> str:
        ratios = [i.predicted_s / i.ttft_s for i in items if i.ttft_s > 0]
        return f"{percentile(ratios, 0.5):.2f} ({len(ratios)})" if ratios else "-"

    print(
        f"   picker prediction: error median {percentile(errors, 0.5):.1%}, p90 "
        f"{percentile(errors, 0.9):.1%}; predicted / delivered median: hits {ratio(hits)}, "
        f"misses {ratio(misses)}"
    )
    # Which requests make the tail: a cold one (under a tenth of its prompt cached) pays its
    # whole prefill wherever it goes; a hit in the tail waited, or was mispredicted.
    slowest = sorted(found, key=lambda i: i.ttft_s)[int(len(found) * 0.9) :]
    cold = [i for i in found if i.cached_tokens < i.prompt_tokens / 10]
    tail_cold = [i for i in slowest if i.cached_tokens < i.prompt_tokens / 10]
    under = [i for i in slowest if i.ttft_s > 2 * i.predicted_s]
    print(
        f"   the slowest 10% ({len(slowest)}): {len(tail_cold)} cold ({len(cold) / len(found):.0%} "
        f"of all requests are, delivered p50 {percentile([i.ttft_s for i in cold], 0.5) * 1000:.0f}"
        f" ms), {len(under)} delivered over twice their prediction"
    )
    corrections = []
    for pod in sorted({item.pod for item in found}):
        held = client.hmget(queue_key(pod), ["wait_log", "prefill_log", "prefill_offset"])
        wait, factor, offset = (float(v) if v is not None else None for v in held)
        corrections.append(
            f"{pod} wait x{math.exp(wait or 0):.2f} prefill x{math.exp(factor or 0):.2f}"
            f" {'+' if (offset or 0) >= 0 else ''}{(offset or 0) * 1000:.0f} ms"
        )
    print("   corrections now: " + "; ".join(corrections))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per run and gateway")
    parser.add_argument("--baseline", help="also a picker of this revision")
    parser.add_argument(
        "--only", choices=("latency", "long", "load"), help="1. and 4., 2. or 3. alone"
    )
    arguments = parser.parse_args()
    seconds = arguments.seconds
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start")
    with RedisServer() as redis_server, tempfile.TemporaryDirectory() as scratch:
        workdir = Path(scratch)
        env = configure(redis_server.url, workdir)
        from django.core.management import call_command

        from kvadmin.api.models import ApiToken

        call_command("migrate", verbosity=0)
        token = ApiToken.issue("bench")[1]
        rig = Rig(env | {"PYTHONUNBUFFERED": "1"}, workdir)
        try:
            rig.spawn(
                sys.executable, "-m", "celery", "-A", "kvadmin", "worker", "--pool=solo",
                "--loglevel=ERROR", "--without-gossip", "--without-mingle",
            )  # fmt: skip
            picker, address = rig.picker(PICKER_METRICS)
            rig.metrics["picker"] = PICKER_METRICS
            instant_fleet, instant = rig.fleet(0.0, INSTANT_GPU_BLOCKS, LONG_WINDOW)
            pair = (("picker", "picker"), ("round robin", "round_robin"))
            gateways = {name: rig.envoy(instant, address, how) for name, how in pair}
            pickers = {"picker": picker}
            if arguments.only != "load":
                floor_port = free_port()
                null_picker = ROOT / "bench" / "processes" / "null_picker.py"
                pickers[FLOOR] = rig.spawn(
                    sys.executable, str(null_picker), str(floor_port), *instant,
                    ready=PICKER_READY,
                )  # fmt: skip
                gateways[FLOOR] = rig.envoy(instant, f"127.0.0.1:{floor_port}", "picker")
            if arguments.baseline:
                name = f"picker {arguments.baseline}"
                tree = baseline_tree(arguments.baseline, workdir)
                rig.metrics[name] = free_port()
                pickers[name], base_address = rig.picker(rig.metrics[name], tree)
                gateways[name] = rig.envoy(instant, base_address, "picker", tree)
            if arguments.only in (None, "latency"):
                picker_cpu = bench_latency(rig, gateways, pickers, seconds)
                bench_api_cpu(env, token, picker_cpu, seconds)
            if arguments.only in (None, "long"):
                bench_long(rig, gateways, pickers, seconds)
            if arguments.only in (None, "load"):
                # The instant pods unregistered before the timed ones register.
                instant_fleet.terminate()
                instant_fleet.wait(timeout=30)
                _, timed = rig.fleet(1.0, TIMED_GPU_BLOCKS)
                three = (*pair, ("least request", "least_request"))
                timed_gateways = {name: rig.envoy(timed, address, how) for name, how in three}
                if arguments.baseline:
                    timed_gateways[name] = rig.envoy(timed, base_address, "picker", tree)
                bench_load(rig, timed_gateways, seconds)
        finally:
            rig.stop()
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
