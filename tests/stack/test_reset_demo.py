"""`make reset-demo` forgets the simulated fleet: its registrations and index entries, and
nothing an operator made (engines registered by hand, their entries, users)."""

import json
import os
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from kvadmin.engines.models import Engine
from kvadmin.stack import state_file
from scoring.keys import DEMO_PODS_KEY
from tests.index import MODEL

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
