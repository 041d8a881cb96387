"""`make run`'s supervisor (kvadmin/stack.py), run for real: a Redis of its own, a free web
port, its own var/, the worker, beat and web server (the demo fleet stays off here: it binds
fixed ports)."""

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvadmin.redis_server import RedisServer, free_port
from tests.conftest import ROOT
from tests.waiting import patient, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


class Supervisor:
    """One `python -m kvadmin.stack` process and every line it printed."""

    def __init__(self, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kvadmin.stack"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def said(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def index_of(self, text: str) -> int:
        return next(n for n, line in enumerate(self.lines) if text in line)


@pytest.fixture
def stack_env(subprocess_env: dict[str, str], tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment for a whole stack on a Redis of its own, a free port and a var dir of its
    own, without the demo fleet."""
    with RedisServer() as server:
        yield subprocess_env | {
            "REDIS_URL": server.url,
            "KVADMIN_PORT": str(free_port()),
            "KVADMIN_VAR_DIR": str(tmp_path),
            "KVADMIN_DEMO": "0",
        }


@pytest.fixture
def running_stack(stack_env: dict[str, str]) -> Iterator[Supervisor]:
    """A stack that printed its login box; stopped (killed if it must) after the test."""
    stack = Supervisor(stack_env)
    wait_until(
        lambda: stack.said("kvadmin is running at") or stack.process.poll() is not None,
        timeout=120, interval=0.1, what="the stack to say it is up",
    )  # fmt: skip
    assert stack.process.poll() is None, "\n".join(stack.lines)
    yield stack
    if stack.process.poll() is None:
        stack.process.kill()
        for pid in children(stack_env):
            os.killpg(pid, signal.SIGKILL)


def children(env: dict[str, str]) -> list[int]:
    """The process groups the supervisor started, in their order (var/stack.json)."""
    return json.loads((Path(env["KVADMIN_VAR_DIR"]) / "stack.json").read_text())["processes"]


def test_a_second_run_says_where_kvadmin_runs(running_stack, stack_env) -> None:
    second = subprocess.run(
        [sys.executable, "-m", "kvadmin.stack"],
        cwd=ROOT, env=stack_env, capture_output=True, text=True, timeout=patient(60),
    )  # fmt: skip
    assert second.returncode == 1, "refused: not started, so not a success"
    url = f"http://127.0.0.1:{stack_env['KVADMIN_PORT']}"
    assert second.stdout.strip().startswith(f"kvadmin is already running at {url}")


def test_a_process_that_dies_is_started_again(running_stack, stack_env) -> None:
    web = children(stack_env)[-1]
    os.killpg(web, signal.SIGKILL)
    wait_until(
        lambda: running_stack.said("web exited with status"), timeout=30, what="the exit noticed"
    )
    wait_until(lambda: web not in children(stack_env) and len(children(stack_env)) == 3,
               timeout=60, what="the web server started again")  # fmt: skip


def test_ctrl_c_stops_everything_in_reverse_order_and_exits_0(running_stack, stack_env) -> None:
    pids = children(stack_env)
    running_stack.process.send_signal(signal.SIGINT)
    assert running_stack.process.wait(timeout=patient(90)) == 0
    running_stack.reader.join(timeout=patient(10))
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.killpg(pid, 0)
    order = [running_stack.index_of(f"stopping {name}") for name in ("web", "beat", "worker")]
    assert order == sorted(order)
    text = "\n".join(running_stack.lines)
    assert "Traceback" not in text and "lifespan" not in text
    assert not (Path(stack_env["KVADMIN_VAR_DIR"]) / "stack.json").exists()
