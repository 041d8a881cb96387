"""`make run` checks every port its stack will bind before it starts anything: a port another
program holds (here a simulated pod's event port) is named with what needs it, the run exits
with status 1, and no process was started (the demo fleet is not left to die on it later)."""

import socket
import subprocess
import sys
from pathlib import Path

from kvadmin.redis_server import RedisServer, free_port
from tests.conftest import ROOT
from tests.waiting import patient


def _hold(port: int) -> socket.socket | None:
    """Bind `port` on 127.0.0.1 (None: another program holds it already, just as good)."""
    holder = socket.socket()
    try:
        holder.bind(("127.0.0.1", port))
    except OSError:
        holder.close()
        return None
    holder.listen()
    return holder


def test_a_taken_fleet_port_is_named_and_nothing_starts(
    subprocess_env: dict[str, str], tmp_path: Path
) -> None:
    holder = _hold(5557)  # the first demo pod's event port (Procfile: simulate's default)
    try:
        with RedisServer() as redis:
            run = subprocess.run(
                [sys.executable, "-m", "kvadmin.stack"],
                cwd=ROOT, capture_output=True, text=True, timeout=patient(60),
                env=subprocess_env | {
                    "REDIS_URL": redis.url,
                    "KVADMIN_PORT": str(free_port()),
                    "KVADMIN_VAR_DIR": str(tmp_path),
                    "KVADMIN_DEMO": "1",
                },
            )  # fmt: skip
    finally:
        if holder is not None:
            holder.close()
    assert run.returncode == 1, run.stdout + run.stderr
    assert "port 5557 on 127.0.0.1 (the demo fleet's vllm-0.default) is taken" in run.stderr
    assert "nothing was started" in run.stderr
    assert not (tmp_path / "stack.json").exists(), "no process was started"
