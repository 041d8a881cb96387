"""`manage.py simulate`: a registered fleet serves traffic, then unregisters itself."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from kvadmin.api.models import ApiToken
from kvadmin.engines.models import Engine
from kvadmin.fleet.fleet import REPLAY_PORT_OFFSET
from tests.fleet.conftest import free_base_port

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_registers_serves_traffic_and_cleans_up(redis_client) -> None:
    out = StringIO()
    base = free_base_port(1, REPLAY_PORT_OFFSET, REPLAY_PORT_OFFSET + 1)  # 2 pods
    http = free_base_port(1)
    call_command(
        "simulate", "--pods", "2", "--kind", "vllm,sglang", "--base-port", str(base),
        "--http-port", str(http), "--register", "--traffic", "200", "--requests", "6",
        "--routing", "random", stdout=out,
    )  # fmt: skip
    text = out.getvalue()
    assert "vllm-0.default: events tcp://127.0.0.1:" in text
    assert "sglang-0.default: events" in text
    assert "requests 6 (0 failed)" in text
    assert not Engine.objects.exists(), "engines are unregistered on exit"
    assert not ApiToken.objects.exists()


def test_a_bad_kind_is_refused() -> None:
    with pytest.raises(CommandError, match="unknown engine kind"):
        call_command("simulate", "--kind", "tgi", "--requests", "1", stdout=StringIO())
