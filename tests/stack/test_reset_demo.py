"""`make reset-demo` forgets the simulated fleet: its registrations and index entries, and
nothing an operator made (engines registered by hand, their entries, users)."""

import json
import os
import socket
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
import redis
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from kvadmin.engines.models import Engine
from kvadmin.redis_server import RedisServer
from kvadmin.stack import state_file
from scoring.keys import DEMO_PODS_KEY
from tests.conftest import ROOT
from tests.index import MODEL
from tests.waiting import patient

EMBEDDED_PORT = 6390
"""The embedded Redis's port when REDIS_URL is unset (kvadmin/settings.py)."""

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def demo_and_real_pods(redis_client, index) -> None:
    """The demo registered vllm-0 (still registered: the fleet was killed) and vllm-1
    (unregistered, its entries left); an operator registered gpu-0 by hand."""
    for pod in ("vllm-0.default", "gpu-0.default"):
        Engine.objects.create(pod=pod, model=MODEL, events_endpoint="tcp://127.0.0.1:1")
    redis_client.hset(DEMO_PODS_KEY, mapping={"vllm-0.default": 1, "vllm-1.default": 1})
    for n, pod in enumerate(("vllm-0.default", "vllm-1.default", "gpu-0.default")):
        index.store(pod, [n])


def test_it_forgets_the_demo_pods_only(redis_client, demo_and_real_pods) -> None:
    get_user_model().objects.create_user("alice", password="pw-alice-123")
    out = StringIO()
    call_command("reset_demo", stdout=out)
    assert list(Engine.objects.values_list("pod", flat=True)) == ["gpu-0.default"]
    assert not redis_client.keys("*vllm-*")
    assert redis_client.keys("*gpu-0.default*")
    assert get_user_model().objects.filter(username="alice").exists()
    assert "vllm-1.default: unregistered" in out.getvalue()


def test_it_refuses_while_the_stack_runs(redis_client, demo_and_real_pods) -> None:
    state_file().write_text(json.dumps({"supervisor": os.getpid(), "processes": []}))
    try:
        with pytest.raises(CommandError, match="is running at"):
            call_command("reset_demo", stdout=StringIO())
    finally:
        state_file().unlink()
    assert Engine.objects.count() == 2


def _embedded_port_free() -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is free
        try:
            probe.bind(("127.0.0.1", EMBEDDED_PORT))
        except OSError:
            return False
    return True


def test_it_works_with_make_run_stopped_and_its_redis_with_it(
    subprocess_env: dict[str, str], tmp_path: Path, redis_client, demo_and_real_pods
) -> None:
    """As README says to run it: `make run` stopped, so its embedded Redis is down. The reset
    starts that Redis on its data (var/redis), forgets the demo there, and stops it again."""
    if not _embedded_port_free():
        pytest.skip(f"port {EMBEDDED_PORT} is taken: a `make run` of someone else's may hold it")
    data = tmp_path / "redis"
    with RedisServer(port=EMBEDDED_PORT, data_dir=data) as embedded:  # the demo's last run
        client = redis.Redis.from_url(embedded.url, decode_responses=True)
        client.hset(DEMO_PODS_KEY, mapping={"vllm-1.default": 1})
        client.close()
    env = {k: v for k, v in subprocess_env.items() if k != "REDIS_URL"}
    run = subprocess.run(
        [sys.executable, "manage.py", "reset_demo"],
        cwd=ROOT, env=env | {"KVADMIN_VAR_DIR": str(tmp_path)},
        capture_output=True, text=True, timeout=patient(120),
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "vllm-1.default: unregistered" in run.stdout
    assert "Error" not in run.stderr
    assert _embedded_port_free(), "the Redis it started is stopped again"
    with RedisServer(port=EMBEDDED_PORT, data_dir=data) as embedded:
        client = redis.Redis.from_url(embedded.url, decode_responses=True)
        assert client.hgetall(DEMO_PODS_KEY) == {}, "forgotten in the embedded Redis's data"
        client.close()
