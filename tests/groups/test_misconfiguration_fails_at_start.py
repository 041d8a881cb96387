"""A group that cannot hold its index stops the start with the reason: the Celery worker and
`make run` (`require_ready`), and `manage.py check`: the setting with `--database default`
(and `migrate`), the groups' servers with `--deploy`."""

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from kvadmin.engines.index_groups import require_ready
from kvadmin.engines.models import Engine
from kvadmin.redis_server import RedisServer, free_port, server_binary
from tests.conftest import ROOT, STARTUP_SECONDS
from tests.groups.conftest import GROUPED, Configure
from tests.index import MODEL
from tests.waiting import patient, wait_until


def _server(*extra: str, port: int | None = None) -> subprocess.Popen:
    port = port or free_port()
    process = subprocess.Popen(
        [server_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "", *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    process.port = port  # type: ignore[attr-defined]
    return process


def _stopped(process: subprocess.Popen) -> None:
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture
def replica(primaries: list[RedisServer]) -> Iterator[str]:
    """A read-only replica of the first primary: its URL."""
    process = _server("--replicaof", "127.0.0.1", str(primaries[0].port))
    try:
        yield f"redis://127.0.0.1:{process.port}/0"  # type: ignore[attr-defined]
    finally:
        _stopped(process)


@pytest.fixture
def cluster_node(tmp_path: Path) -> Iterator[str]:
    """A Redis Cluster node (alone: enough for INFO cluster to say so): its URL."""
    config = tmp_path / "nodes.conf"
    port = _cluster_port()
    process = _server("--cluster-enabled", "yes", "--cluster-config-file", str(config), port=port)
    try:
        yield f"redis://127.0.0.1:{process.port}/0"  # type: ignore[attr-defined]
    finally:
        _stopped(process)


def _cluster_port() -> int:
    """A free port whose cluster bus port (10,000 above it) is free too."""
    while True:
        port = free_port()
        if port + 10_000 < 65_536:
            try:
                socket.create_server(("127.0.0.1", port + 10_000)).close()
                return port
            except OSError:
                continue


def _check_fails(match: str) -> None:
    """The servers' check (`check --deploy`) and the start of a process say `match`."""
    with pytest.raises(SystemCheckError, match=match):
        call_command("check", deploy=True)
    with pytest.raises(SystemExit, match=match.removeprefix("E011.*")):
        require_ready("test")


def _setting_fails(match: str) -> None:
    """The setting's check (`check --database default`, `migrate`) says `match`."""
    with pytest.raises(SystemCheckError, match=match):
        call_command("check", databases=["default"])


@pytest.mark.django_db
def test_a_read_only_replica_is_no_primary(
    configure_groups: Configure, replica: str, redis_url: str
) -> None:
    configure_groups({GROUPED: replica, "*": redis_url})
    wait_until(lambda: _answers(replica), what="the replica up")
    _check_fails(r"E011.*index group Qwen/\* .* is a read-only replica \(ROLE: slave\)")


@pytest.mark.django_db
def test_a_redis_cluster_node_is_refused(
    configure_groups: Configure, cluster_node: str, redis_url: str
) -> None:
    configure_groups({GROUPED: cluster_node, "*": redis_url})
    wait_until(lambda: _answers(cluster_node), what="the cluster node up")
    _check_fails(r"index group Qwen/\* .* is a Redis Cluster node")


@pytest.mark.django_db
def test_an_unreachable_group_is_named(configure_groups: Configure, redis_url: str) -> None:
    configure_groups({GROUPED: f"redis://127.0.0.1:{free_port()}/0", "*": redis_url})
    _check_fails(r"index group Qwen/\* .* does not answer")
    call_command("check", databases=["default"])  # a migration job need not reach Redis


@pytest.mark.django_db
def test_a_registered_model_two_patterns_match_is_refused(
    configure_groups: Configure, primaries: list[RedisServer], redis_url: str
) -> None:
    Engine.objects.create(pod="q.default", model=MODEL, kind="vllm", events_endpoint="tcp://h:1")
    configure_groups({GROUPED: primaries[0].url, "*-8B": primaries[1].url, "*": redis_url})
    _setting_fails(r"E010.*the model 'Qwen/Qwen3-8B' matches \['Qwen/\*', '\*-8B'\]")


@pytest.mark.django_db
def test_a_setting_without_a_default_is_refused(configure_groups, primaries) -> None:
    configure_groups({GROUPED: primaries[0].url})
    _setting_fails("has no default group")


@pytest.mark.django_db
def test_good_groups_pass_the_check(configure_groups, primaries, redis_url) -> None:
    configure_groups({GROUPED: primaries[0].url, "*": redis_url})
    call_command("check", databases=["default"])
    call_command("check", deploy=True)
    require_ready("test")


def test_a_worker_exits_naming_a_replica_given_as_a_group(
    subprocess_env: dict[str, str], replica: str
) -> None:
    wait_until(lambda: _answers(replica), what="the replica up")
    groups = {GROUPED: replica, "*": subprocess_env["REDIS_URL"]}
    env = subprocess_env | {"KVADMIN_INDEX_GROUPS": json.dumps(groups)}
    worker = subprocess.run(
        _celery_worker(),
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=patient(STARTUP_SECONDS),
    )
    assert worker.returncode != 0
    assert "celery: index group Qwen/* " in worker.stderr + worker.stdout
    assert "is a read-only replica (ROLE: slave), not a primary" in worker.stderr + worker.stdout


def _celery_worker() -> list[str]:
    return [sys.executable, "-m", "celery", "-A", "kvadmin", "worker", "--pool=solo"]


def _answers(url: str) -> bool:
    try:
        with redis.Redis.from_url(url, socket_timeout=1) as client:
            return bool(client.ping())
    except redis.ConnectionError:
        return False


@pytest.mark.django_db(transaction=True)
def test_make_run_stops_naming_a_replica_given_as_a_group(
    subprocess_env: dict[str, str], replica: str, tmp_path: Path
) -> None:
    """`make run`'s supervisor (kvadmin/stack.py) checks the groups once Redis answers, before
    it starts the worker, beat and web server."""
    wait_until(lambda: _answers(replica), what="the replica up")
    groups = {GROUPED: replica, "*": subprocess_env["REDIS_URL"]}
    env = subprocess_env | {
        "KVADMIN_INDEX_GROUPS": json.dumps(groups),
        "KVADMIN_PORT": str(free_port()),
        "KVADMIN_VAR_DIR": str(tmp_path),
        "KVADMIN_DEMO": "0",
    }
    stack = subprocess.run(
        [sys.executable, "-m", "kvadmin.stack"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=patient(STARTUP_SECONDS),
    )
    said = stack.stdout + stack.stderr
    assert stack.returncode != 0, said
    assert "system: index group Qwen/* " in said and "is a read-only replica" in said
    assert (
        not (tmp_path / "stack.json").exists()
        or '"processes": []' in (tmp_path / "stack.json").read_text()
    )
