"""The worker's timed loops (the engine probes, the value-format rewrite: beat tasks) outlive
whatever a run meets: Redis held BUSY by a long script, a refused command (MOVED), a bug. The
run returns instead of raising, the failure is counted and logged once, the runs within its
backoff are skipped, and a run after it works again."""

import logging
from collections.abc import Callable

import pytest
import redis
from django.conf import settings as django_settings

from kvadmin.engines.models import Engine
from kvadmin.index import value_format
from kvadmin.ingest import probes, tasks
from kvadmin.loop_guard import LoopGuard
from kvadmin.redis_server import free_port
from scoring import keys
from tests.redis_busy import held_busy
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db
POD = "vllm-0.default"


@pytest.fixture
def engine(redis_client: redis.Redis) -> Engine:
    """An engine whose /health refuses connections: every probe run writes its probe HASH."""
    return Engine.objects.create(
        pod=POD, model="m", kind="vllm", http_base_url=f"http://127.0.0.1:{free_port()}"
    )


@pytest.fixture
def fresh_guards(monkeypatch) -> tuple[LoopGuard, LoopGuard]:
    """Each test's own guards (a module's guard would carry one test's backoff into the next)."""
    probes_guard = LoopGuard("probes", probes.log)
    rewrite_guard = LoopGuard("value_format_rewrite", tasks.log)
    monkeypatch.setattr(probes, "_guard", probes_guard)
    monkeypatch.setattr(tasks, "_rewrite_guard", rewrite_guard)
    return probes_guard, rewrite_guard


def _probed(client: redis.Redis) -> bool:
    return client.hget(keys.engine_probe_key(POD), "http_ok") == "0"


def _rewritten(client: redis.Redis) -> bool:
    return client.hget(keys.VALUE_FORMAT_KEY, "target") == "legacy"


def _faulty(real: Callable[..., object], faults: list[Exception]) -> Callable[..., object]:
    """`real`, raising the queued faults first (the run's own seam)."""

    def run(*args, **kwargs):
        if faults:
            raise faults.pop(0)
        return real(*args, **kwargs)

    return run


@pytest.mark.parametrize(
    ("fault", "kind"),
    [(redis.ResponseError("MOVED 1 127.0.0.1:6391"), "redis_error"), (TypeError(), "TypeError")],
    ids=["moved", "bug"],
)
def test_a_failed_probe_run_is_counted_backed_off_and_followed(
    engine, redis_client, fresh_guards, monkeypatch, caplog, fault, kind
) -> None:
    guard, _ = fresh_guards
    monkeypatch.setattr(probes, "probe_targets", _faulty(probes.probe_targets, [fault, fault]))

    assert probes.probe_engines() == 0  # failed, counted, not raised
    assert probes.probe_engines() == 0  # within the backoff: skipped
    assert guard.counts[kind] == 1
    wait_until(guard.due, what="the backoff to pass")
    assert probes.probe_engines() == 0  # the second fault
    wait_until(guard.due, what="the backoff to pass")
    assert probes.probe_engines() == 1
    assert _probed(redis_client)
    assert guard.counts[kind] == 2
    logged = [r for r in caplog.records if "probes: " in r.getMessage()]
    assert len(logged) == 1, "one line per kind of failure"


def test_a_probe_run_outlives_a_busy_redis(engine, redis_client, fresh_guards) -> None:
    guard, _ = fresh_guards
    with held_busy(django_settings.INDEX_REDIS_URL):
        assert probes.probe_engines() == 0
    assert guard.counts["redis_unavailable"] == 1
    wait_until(lambda: guard.due() and probes.probe_engines() == 1, what="a probe after BUSY")
    assert _probed(redis_client)


def _to_legacy(settings) -> None:
    settings.KVADMIN = {**getattr(settings, "KVADMIN", {}), "INDEX_VALUE_FORMAT": "legacy"}


@pytest.mark.parametrize(
    ("fault", "kind"),
    [(redis.ResponseError("MOVED 1 127.0.0.1:6391"), "redis_error"), (KeyError(), "KeyError")],
    ids=["moved", "bug"],
)
def test_a_failed_rewrite_run_is_counted_backed_off_and_followed(
    redis_client, fresh_guards, monkeypatch, settings, caplog, fault, kind
) -> None:
    _, guard = fresh_guards
    _to_legacy(settings)
    monkeypatch.setattr(value_format, "rewrite", _faulty(value_format.rewrite, [fault]))
    caplog.set_level(logging.WARNING)

    tasks.rewrite_values()  # failed, counted, not raised
    tasks.rewrite_values()  # within the backoff: skipped
    assert guard.counts[kind] == 1
    wait_until(guard.due, what="the backoff to pass")
    tasks.rewrite_values()
    assert _rewritten(redis_client)


def test_a_rewrite_run_outlives_a_busy_redis(redis_client, fresh_guards, settings) -> None:
    _, guard = fresh_guards
    _to_legacy(settings)
    with held_busy(django_settings.INDEX_REDIS_URL):
        tasks.rewrite_values()
    assert guard.counts["redis_unavailable"] == 1
    wait_until(lambda: guard.due() and (tasks.rewrite_values() or _rewritten(redis_client)))
