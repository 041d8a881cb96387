"""A real gateway for the tests: simulated pods registered with serving addresses, real
endpoint picker processes (`manage.py endpoint_picker`) and the real Envoy binary with the
shipped config (kvadmin/gateway/envoy.py renders it for this test's ports)."""

import asyncio
import http.client
import json
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
import redis
import redis.asyncio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from kvadmin.engines.models import Engine
from kvadmin.fleet.fleet import Fleet
from kvadmin.gateway import envoy
from kvadmin.redis_server import free_port
from kvadmin.routing import outcomes
from kvadmin.routing.decisions import Decision
from tests import ports
from tests.conftest import ROOT, local_config, stop_process
from tests.index import MODEL
from tests.waiting import patient, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def logged(decision_id: str, redis_client: redis.Redis) -> Decision | None:
    """The logged decision of that id (`outcomes.find_async`, as the outcome API finds it),
    from the database `redis_client` reads."""
    where = redis_client.connection_pool.connection_kwargs
    address = {name: where[name] for name in ("host", "port", "db")}

    async def find() -> Decision | None:
        client = redis.asyncio.Redis(**address, decode_responses=True)
        try:
            return await outcomes.find_async(decision_id, client)
        finally:
            await client.aclose()

    return asyncio.run(find())


@dataclass
class Picker:
    process: subprocess.Popen
    address: str
    metrics_url: str

    def counter(self, name: str, **labels: str) -> float:
        """A counter's value from the picker's Prometheus endpoint (0 when absent)."""
        text = urllib.request.urlopen(self.metrics_url, timeout=patient(5)).read().decode()
        wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        line_start = f"{name}_total{{{wanted}}} " if wanted else f"{name}_total "
        for line in text.splitlines():
            if line.startswith(line_start):
                return float(line.split()[-1])
        return 0.0


def health(address: str, service: str, credentials: grpc.ChannelCredentials | None = None) -> int:
    channel = (
        grpc.secure_channel(address, credentials) if credentials else grpc.insecure_channel(address)
    )
    with channel:
        stub = health_pb2_grpc.HealthStub(channel)
        request = health_pb2.HealthCheckRequest(service=service)
        return stub.Check(request, timeout=patient(2)).status


def start_picker(env: dict[str, str], *extra: str) -> Picker:
    """A picker process on free ports, once it serves (`tests.ports`; with TLS, once it
    listens: the plaintext health check cannot ask it)."""

    def launch() -> tuple[subprocess.Popen, list[int], tuple[str, int]]:
        port, metrics = free_port(), free_port()
        process = subprocess.Popen(
            [sys.executable, "manage.py", "endpoint_picker", "--host", "127.0.0.1"]
            + ["--port", str(port), "--metrics-port", str(metrics), *extra],
            cwd=ROOT,
            env=env,
        )
        return process, [port, metrics], (f"127.0.0.1:{port}", metrics)

    def serving(started: tuple[str, int]) -> bool:
        if "--tls-cert" in extra:
            return True
        try:
            return health(started[0], "readiness") == health_pb2.HealthCheckResponse.SERVING
        except grpc.RpcError:
            return False

    process, (address, metrics) = ports.start_server(
        launch, serving, "the endpoint picker to serve", 60
    )
    return Picker(process, address, f"http://127.0.0.1:{metrics}/metrics")


@dataclass
class Gateway:
    url: str
    admin: str
    process: subprocess.Popen
    pickers: list[Picker]
    fleet: Fleet | None
    pods: dict[str, str] = field(default_factory=dict)
    """Pod id by serving address."""

    def stat(self, name: str) -> int:
        """One of Envoy's counters (its admin /stats)."""
        text = urllib.request.urlopen(
            f"{self.admin}/stats?filter=^{name}$", timeout=patient(5)
        ).read()
        for line in text.decode().splitlines():
            key, _, value = line.partition(": ")
            if key == name:
                return int(value)
        return 0

    def post(
        self, path: str, body: Any, headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        connection = http.client.HTTPConnection(
            self.url.removeprefix("http://"), timeout=patient(30)
        )
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        connection.request(
            "POST", path, data, {"Content-Type": "application/json"} | (headers or {})
        )
        response = connection.getresponse()
        answer = (
            response.status,
            {k.lower(): v for k, v in response.getheaders()},
            response.read(),
        )
        connection.close()
        return answer


def start_envoy(tmp_path: Path, pickers: list[str], pods: list[str], **options: Any) -> tuple:
    """An Envoy on free ports, once it is ready (`tests.ports`): its process, listener URL and
    admin URL."""
    # Envoy waits for each picker answer past the pickers' own deadline (picker_env): on a
    # loaded machine a long prompt's tokenizing outlasts the shipped 0.5 s, and the request
    # would pass unrouted (failure_mode_allow).
    options.setdefault("message_timeout_s", patient(20))

    def launch() -> tuple[subprocess.Popen, list[int], tuple[str, str]]:
        listen, admin = free_port(), free_port()
        addresses = f"127.0.0.1:{listen}", f"127.0.0.1:{admin}"
        config = envoy.write(
            envoy.render(*addresses, pickers, pods, **options),
            tmp_path / f"envoy-{free_port()}.yaml",
        )
        process = subprocess.Popen(
            [envoy.binary(), "-c", str(config), "--concurrency", "1", "-l", "warning"]
            + ["--base-id", str(free_port())],
            stdout=subprocess.DEVNULL,
        )
        return process, [listen, admin], addresses

    def ready(addresses: tuple[str, str]) -> bool:
        try:
            url = f"http://{addresses[1]}/ready"
            return urllib.request.urlopen(url, timeout=patient(1)).status == 200
        except OSError:
            return False

    process, (listen, admin) = ports.start_server(launch, ready, "envoy to be ready", 60)
    return process, f"http://{listen}", f"http://{admin}"


def wait_for_pickers(admin: str, pickers: list[str]) -> None:
    """Envoy's health checks found every picker healthy (it sends no stream before)."""

    def healthy() -> bool:
        text = urllib.request.urlopen(f"{admin}/clusters", timeout=patient(2)).read().decode()
        return all(f"picker::{p}::health_flags::healthy" in text for p in pickers)

    wait_until(healthy, timeout=30, what="envoy to see the pickers healthy")


@pytest.fixture
def picker_env(subprocess_env: dict[str, str]) -> dict[str, str]:
    """The pickers' environment: a deadline and a request budget no loaded test machine
    misses (their own tests set ones they must miss)."""
    return subprocess_env | {
        "KVADMIN_PICKER_DECISION_DEADLINE_SECONDS": "10",
        "KVADMIN_PICKER_REQUEST_BUDGET_SECONDS": "20",
    }


@pytest.fixture
def gateway_of(
    tmp_path: Path, picker_env: dict[str, str], start_fleet
) -> Iterator[Callable[..., Gateway]]:
    """`gateway_of(n_pods, pickers=1, env=..., extra_endpoints=[...], registered={...},
    **render options)`: a fleet of `n_pods` pods registered with serving addresses (and the
    `registered` engine fields over their own), pickers and Envoy."""
    processes: list[subprocess.Popen] = []

    def start(
        n_pods: int = 3,
        pickers: int = 1,
        env: dict[str, str] | None = None,
        extra_endpoints: tuple[str, ...] = (),
        picker_addresses: list[str] | None = None,
        registered: dict[str, Any] | None = None,
        **pod_options: Any,
    ) -> Gateway:
        render = {
            k: pod_options.pop(k)
            for k in ("failure_mode_allow", "subset_from_header", "balancing")
            if k in pod_options
        }
        configs = [
            local_config(f"vllm-{i}.default", model=MODEL, **pod_options) for i in range(n_pods)
        ]
        fleet = start_fleet(*configs) if configs else None
        served = {}
        for config in configs:
            Engine.objects.create(**config.engine_fields() | (registered or {}))
            served[config.serve_address] = config.name
        started = [start_picker(env or picker_env) for _ in range(pickers)]
        processes.extend(p.process for p in started)
        addresses = picker_addresses or [p.address for p in started]
        process, url, admin = start_envoy(
            tmp_path, addresses, [*served, *extra_endpoints], **render
        )
        processes.append(process)
        if picker_addresses is None:
            wait_for_pickers(admin, addresses)
        return Gateway(url, admin, process, started, fleet, served)

    gateways: list[Gateway] = []

    def started(*args: Any, **options: Any) -> Gateway:
        gateways.append(start(*args, **options))
        return gateways[-1]

    yield started
    try:
        for gateway in gateways:
            if gateway.pickers:
                # No stream failed but by Envoy's message timeout (a loaded test machine):
                # the picker never broke off a stream.
                allowed = gateway.stat("http.gateway.ext_proc.failure_mode_allowed")
                assert allowed == gateway.stat("http.gateway.ext_proc.message_timeouts")
    finally:
        for process in processes:
            stop_process(process)
