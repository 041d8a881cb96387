"""The probes' period and timeout are knobs (KVADMIN_PROBE_PERIOD_SECONDS,
KVADMIN_PROBE_TIMEOUT_SECONDS), read as strictly as the others: beat's schedule follows the
period, each probe gives up after the timeout, and `manage.py check` names bad values."""

import subprocess
import sys

import pytest
import redis

from kvadmin.conf import check_knobs
from kvadmin.engines.models import Engine
from kvadmin.ingest.probes import probe_engines
from kvadmin.redis_server import free_port
from scoring import keys
from tests.conftest import ROOT
from tests.waiting import patient

SCHEDULE = (
    "import django; django.setup(); from django.conf import settings; "
    "entry = settings.CELERY_BEAT_SCHEDULE['engines-probe']; "
    "print(entry['schedule'], entry['options']['expires'])"
)


def _schedule(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", SCHEDULE],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=patient(60),
    )  # fmt: skip


def test_beat_probes_every_period(subprocess_env) -> None:
    assert _schedule(subprocess_env).stdout.split() == ["2.0", "2.0"]
    every_five = _schedule(subprocess_env | {"KVADMIN_PROBE_PERIOD_SECONDS": "5"})
    assert every_five.stdout.split() == ["5.0", "5.0"]


def test_a_period_that_is_not_a_number_stops_the_start(subprocess_env) -> None:
    done = _schedule(subprocess_env | {"KVADMIN_PROBE_PERIOD_SECONDS": "2s"})
    assert done.returncode != 0
    assert "KVADMIN_PROBE_PERIOD_SECONDS='2s': expected a number" in done.stderr


@pytest.mark.django_db
def test_a_probe_gives_up_after_the_timeout(settings, redis_client: redis.Redis) -> None:
    """A replay socket nobody answers (nothing listens: ZMQ waits for it) is given the
    timeout, not the default second."""
    Engine.objects.create(
        pod="vllm-0.default",
        model="m/a",
        events_endpoint=f"tcp://127.0.0.1:{free_port()}",
        replay_endpoint=f"tcp://127.0.0.1:{free_port()}",
    )
    settings.KVADMIN = {"PROBE_TIMEOUT_SECONDS": "0.2"}

    assert probe_engines() == 1

    probe = redis_client.hgetall(keys.engine_probe_key("vllm-0.default"))
    assert probe["replay_ok"] == "0"
    assert 150 <= float(probe["replay_ms"]) < 900, probe


@pytest.mark.parametrize(
    ("knobs", "found"),
    [
        ({"PROBE_PERIOD_SECONDS": "5", "PROBE_TIMEOUT_SECONDS": "0.5"}, []),
        ({"PROBE_PERIOD_SECOND": "5"}, ["kvadmin.W001"]),
        ({"PROBE_TIMEOUT_SECONDS": "soon"}, ["kvadmin.E001"]),
        ({"PROBE_PERIOD_SECONDS": "0"}, ["kvadmin.E004"]),
        ({"PROBE_TIMEOUT_SECONDS": "-1"}, ["kvadmin.E004"]),
        ({"PROBE_TIMEOUT_SECONDS": "2"}, ["kvadmin.W003"]),
        ({"PROBE_PERIOD_SECONDS": "15", "PROBE_TIMEOUT_SECONDS": "1"}, ["kvadmin.W004"]),
    ],
)
def test_the_check_knows_the_probe_knobs(settings, knobs, found) -> None:
    settings.KVADMIN = knobs
    assert [message.id for message in check_knobs(None)] == found
