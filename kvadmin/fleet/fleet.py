"""A simulated fleet: N pods in one process, mixed engine kinds allowed.

Port scheme (`plan_fleet`), for pod i (0-based) and data-parallel rank r:

    events (ZMQ PUB)      base_port + i * dp_size + r
    replay (ZMQ ROUTER)   events port + REPLAY_PORT_OFFSET (1000)
    HTTP                  http_port + i

so `plan_fleet(4, "vllm", base_port=5557, http_port=8100)` gives pods `vllm-0.default` ..
`vllm-3.default` publishing on 5557..5560, replaying on 6557..6560 and serving HTTP on 8100..8103.
Each pod is an engine whose rank r sits at its base ports + r, as compatibility.md 4.1 says.

`simulate --pods 4 --kind vllm[,sglang] --base-port 5557 --http-port 8100` is
`Fleet(plan_fleet(4, kinds, 5557, 8100)).start()`; `--register` writes each
`config.engine_fields()` as an `engines.Engine`; traffic is
`traffic.TrafficGenerator(fleet.endpoints(), router, workload.Workload(model)).run(rate=...)`.
"""

import itertools
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from kvadmin.fleet.cache import ENGINE_KINDS, EngineKind
from kvadmin.fleet.http import HttpServers, PodApp
from kvadmin.fleet.pod import PodConfig, SimPod
from kvadmin.fleet.traffic import PodEndpoint

READY_LINE = "fleet up:"
"""What `simulate` prints once its pods serve; `make run` prints the login after it."""

REPLAY_PORT_OFFSET = 1000


def plan_fleet(
    pods: int,
    kind: EngineKind | Sequence[EngineKind] = "vllm",
    base_port: int = 5557,
    http_port: int = 8100,
    *,
    namespace: str = "default",
    dp_size: int = 1,
    replay: bool = True,
    cpu_blocks: int = 0,
    disk_blocks: int = 0,
    sglang_write_policy: str | None = None,
    **options: Any,
) -> list[PodConfig]:
    """Configs for `pods` pods. A sequence of kinds is cycled (`["vllm", "sglang"]` alternates);
    pods are named `{kind}-{n}.{namespace}`, n counting per kind. `disk_blocks` and
    `sglang_write_policy` (HiCache's, `fleet.offload`; None: its default) apply to SGLang pods
    only. Other `options` are `PodConfig` fields shared by every pod (model, host,
    gpu_blocks, topic, encoding...)."""
    kinds = [kind] if isinstance(kind, str) else list(kind)
    if pods < 1 or not kinds:
        raise ValueError("a fleet needs at least one pod and one engine kind")
    unknown = set(kinds) - set(ENGINE_KINDS)
    if unknown:
        raise ValueError(f"unknown engine kind(s) {sorted(unknown)}; use {list(ENGINE_KINDS)}")
    if pods * dp_size > REPLAY_PORT_OFFSET:
        raise ValueError(f"at most {REPLAY_PORT_OFFSET} event ports fit before the replay ports")
    counters = {k: itertools.count() for k in kinds}
    configs = []
    for i, pod_kind in zip(range(pods), itertools.cycle(kinds)):
        events_port = base_port + i * dp_size
        configs.append(
            PodConfig(
                name=f"{pod_kind}-{next(counters[pod_kind])}.{namespace}",
                kind=pod_kind,
                events_port=events_port,
                replay_port=events_port + REPLAY_PORT_OFFSET if replay else None,
                http_port=http_port + i,
                dp_size=dp_size,
                cpu_blocks=cpu_blocks,
                disk_blocks=disk_blocks if pod_kind == "sglang" else 0,
                write_policy=sglang_write_policy if pod_kind == "sglang" else None,
                **options,
            )
        )
    _check_ports(configs)
    return configs


def pod_ports(config: PodConfig) -> list[int]:
    """Every port a pod binds: its HTTP port, and per rank its events and replay ports."""
    ports = [config.http_port]
    for rank in range(config.dp_size):
        ports.append(config.events_port + rank)
        if config.replay_port is not None:
            ports.append(config.replay_port + rank)
    return ports


def _check_ports(configs: Sequence[PodConfig]) -> None:
    used: dict[int, str] = {}
    for config in configs:
        for port in pod_ports(config):
            if port in used:
                raise ValueError(f"port {port} is used by both {used[port]} and {config.name}")
            used[port] = config.name


class Fleet:
    """Starts the pods' event publishers and HTTP servers together; `stop()` (or leaving the
    `with` block) closes every port. If any port cannot be bound, `start()` closes what it
    opened and raises."""

    def __init__(self, configs: Sequence[PodConfig]) -> None:
        _check_ports(configs)
        names = [c.name for c in configs]
        if len(set(names)) != len(names):
            raise ValueError("pod names must be unique")
        self.configs = list(configs)
        self.pods: list[SimPod] = []
        self._http: HttpServers | None = None

    def start(self) -> "Fleet":
        try:
            for config in self.configs:
                self.pods.append(SimPod(config))
            self._http = HttpServers(
                [(PodApp(pod), pod.config.host, pod.config.http_port) for pod in self.pods]
            )
            self._http.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self._http is not None:
            self._http.stop()
            self._http = None
        for pod in self.pods:
            pod.close()
        self.pods.clear()

    def __enter__(self) -> "Fleet":
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def pod(self, name: str) -> SimPod:
        for pod in self.pods:
            if pod.name == name:
                return pod
        raise KeyError(name)

    def endpoints(self) -> list[PodEndpoint]:
        """The pods as routing targets for `traffic.TrafficGenerator`."""
        return [pod.config.endpoint() for pod in self.pods]

    def contents(self) -> dict[str, set[tuple[int, str]]]:
        """Ground truth per pod id: (standardized hash, medium) of every block held."""
        return {pod.name: pod.contents() for pod in self.pods}

    def flush(self, timeout: float = 10.0) -> None:
        """Return once every pod has sent every batch asked for so far."""
        for pod in self.pods:
            pod.flush(timeout)

    def wait_for_subscribers(self, count: int = 1, timeout: float = 10.0) -> None:
        for pod in self.pods:
            pod.wait_for_subscribers(count, timeout)
