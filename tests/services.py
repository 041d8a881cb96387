"""A pytest plugin (loaded with `-p tests.services`) that starts this session's servers
before Django reads its settings, so every setting derived from REDIS_URL and DATABASE_URL
points at them: a redis-server, and with KVADMIN_TEST_DATABASE=postgresql (`make
test-postgres`) a PostgreSQL server; otherwise the database is a SQLite file.

Never the developer's or CI's running servers: new ones on free ports, gone at the end.
"""

import os
import tempfile

import pytest

from kvadmin.redis_server import RedisServer
from tests.postgres import PostgresServer
from tests.waiting import patient

_server: RedisServer | None = None
_postgres: PostgresServer | None = None
_scratch = tempfile.TemporaryDirectory(prefix="kvadmin-tests-")


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args) -> None:
    global _server, _postgres
    _server = RedisServer().start()
    if os.environ.get("KVADMIN_TEST_DATABASE") == "postgresql":
        _postgres = PostgresServer().start()
        os.environ["DATABASE_URL"] = _postgres.url
    else:
        os.environ.pop("DATABASE_URL", None)
    os.environ["REDIS_URL"] = _server.url
    os.environ.pop("CELERY_BROKER_URL", None)
    os.environ["KVADMIN_DEMO"] = "0"
    os.environ["KVADMIN_TEST_DB"] = os.path.join(_scratch.name, "test.sqlite3")
    # The session's own var/ (secret key, admin password, a stack's state): never the
    # checkout's, where a developer's `make run` may be running.
    os.environ["KVADMIN_VAR_DIR"] = os.path.join(_scratch.name, "var")
    # Request-path Redis clients give up after REDIS_TIMEOUT_SECONDS (0.5 s in production):
    # on a loaded test machine a connect to a healthy Redis can take longer, and the request
    # would answer 503. The tests of a stalled Redis's quick 503 set the production value
    # (tests/faults/conftest.py).
    os.environ["REDIS_TIMEOUT_SECONDS"] = str(patient(5.0))


def pytest_unconfigure(config) -> None:
    if _server is not None:
        _server.stop()
    if _postgres is not None:
        _postgres.stop()
    _scratch.cleanup()


def redis_server() -> RedisServer:
    assert _server is not None, "tests.services was not loaded as a plugin"
    return _server
