"""A Redis primary, its replica and three Sentinels, as real processes on free ports: what
production runs for each Redis role (README, "Production"), with Sentinel's timeouts short
so that a failover takes seconds."""

import subprocess
from pathlib import Path

import redis

from kvadmin.redis_server import free_port, server_binary
from tests.waiting import patient, wait_until

MASTER = "kvadmin"
DOWN_AFTER_MS = 1000
"""A primary silent this long is subjectively down (production: several seconds)."""
FAILOVER_TIMEOUT_MS = 3000


class SentinelTopology:
    """Primary, replica and three Sentinels monitoring the primary as MASTER (quorum 2)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.primary_port, self.replica_port = free_port(), free_port()
        self.sentinel_ports = [free_port() for _ in range(3)]
        self.processes: dict[str, subprocess.Popen] = {}

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{MASTER}/0"

    def _server(self, name: str, port: int, *extra: str) -> None:
        command = [server_binary(), "--port", str(port), "--bind", "127.0.0.1"]
        # --dir: a replica writes the primary's snapshot there.
        command += ["--save", "", "--appendonly", "no", "--dir", str(self.workdir), *extra]
        self.processes[name] = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
        )

    def start(self) -> "SentinelTopology":
        self._server("primary", self.primary_port)
        self._server(
            "replica", self.replica_port, "--replicaof", "127.0.0.1", str(self.primary_port)
        )
        for n, port in enumerate(self.sentinel_ports):
            config = self.workdir / f"sentinel-{n}.conf"  # Sentinel rewrites its own file
            config.write_text(
                f"port {port}\nbind 127.0.0.1\n"
                f"sentinel monitor {MASTER} 127.0.0.1 {self.primary_port} 2\n"
                f"sentinel down-after-milliseconds {MASTER} {DOWN_AFTER_MS}\n"
                f"sentinel failover-timeout {MASTER} {FAILOVER_TIMEOUT_MS}\n"
                f"sentinel parallel-syncs {MASTER} 1\n"
            )
            self.processes[f"sentinel-{n}"] = subprocess.Popen(
                [server_binary(), str(config), "--sentinel"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.STDOUT,
            )
        wait_until(self._settled, timeout=30, what="the replica in sync and every Sentinel aware")
        return self

    def _settled(self) -> bool:
        try:
            replica = redis.Redis(port=self.replica_port, socket_timeout=1)
            with replica:
                if replica.info("replication").get("master_link_status") != "up":
                    return False
            for port in self.sentinel_ports:
                with redis.Redis(port=port, socket_timeout=1, decode_responses=True) as sentinel:
                    state = sentinel.sentinel_master(MASTER)
                    if state["num-other-sentinels"] < 2 or state["num-slaves"] < 1:
                        return False
            return True
        except redis.ConnectionError:
            return False

    def primary(self) -> int:
        """The port the Sentinels name as the primary now."""
        for port in self.sentinel_ports:
            try:
                with redis.Redis(port=port, socket_timeout=1) as sentinel:
                    return int(sentinel.sentinel_get_master_addr_by_name(MASTER)[1])
            except redis.ConnectionError:
                continue
        raise RuntimeError("no Sentinel answers")

    def kill_primary(self) -> int:
        """SIGKILL the primary's process (by its PID); returns the port it served."""
        name = "primary" if self.primary() == self.primary_port else "replica"
        process = self.processes[name]
        process.kill()
        process.wait()
        return self.primary_port if name == "primary" else self.replica_port

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(timeout=patient(10))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
