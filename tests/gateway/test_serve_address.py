"""Engines' serving addresses: ip:port, unique, set by `engines add --serve`."""

import pytest
from django.core.management import CommandError, call_command

from kvadmin.engines.models import Engine, serve_address_problem

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("value", ["10.0.0.5:8000", "[2600:4040::1]:80", "127.0.0.1:65535"])
def test_an_ip_and_port_is_a_serving_address(value: str) -> None:
    assert serve_address_problem(value) is None


@pytest.mark.parametrize(
    "value", ["10.0.0.5", "pod.local:8000", "10.0.0.5:0", "10.0.0.5:99999", "::1:80", ":80"]
)
def test_anything_else_is_not(value: str) -> None:
    assert serve_address_problem(value) is not None


def add(pod: str, serve: str) -> None:
    call_command(
        "engines", "add", "--pod", pod, "--model", "m/x", "--kind", "vllm",
        "--events", "tcp://127.0.0.1:5557", "--serve", serve,
    )  # fmt: skip


def test_engines_add_sets_it_once_per_engine() -> None:
    add("vllm-0.default", "10.0.0.5:8000")
    assert Engine.objects.get(pod="vllm-0.default").serve_address == "10.0.0.5:8000"
    with pytest.raises(CommandError, match="--serve: another engine has this serving address"):
        add("vllm-1.default", "10.0.0.5:8000")
    with pytest.raises(CommandError, match="--serve: 'pod:80' "):
        add("vllm-2.default", "pod:80")
    add("vllm-3.default", "")  # none: routed by the score API only
    add("vllm-4.default", "")
