"""`manage.py engines`: scripts register, list and remove engines; bad input names the field."""

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from kvadmin.engines.models import Engine
from kvadmin.engines.registry import registry_version
from kvadmin.ingest.registered import load_streams
from tests.index import MODEL

pytestmark = pytest.mark.django_db(transaction=True)

ADD = [
    "add",
    "--pod",
    "vllm-0.default",
    "--model",
    MODEL,
    "--kind",
    "vllm",
    "--events",
    "tcp://127.0.0.1:5557",
    "--replay",
    "tcp://127.0.0.1:5558",
    "--topic",
    "kv-events",
    "--dp-size",
    "2",
    "--block-size",
    "16",
]


def _run(*args: str) -> str:
    from io import StringIO

    out = StringIO()
    call_command("engines", *args, stdout=out)
    return out.getvalue()


def test_it_adds_an_engine(redis_client) -> None:
    before = registry_version()
    _run(*ADD)
    engine = Engine.objects.get(pod="vllm-0.default")
    assert (engine.model, engine.kind, engine.topic, engine.dp_size) == (
        MODEL,
        "vllm",
        "kv-events",
        2,
    )
    assert registry_version() > before


def test_each_rank_reads_from_its_own_ports(redis_client) -> None:
    _run(*ADD)
    streams = load_streams()
    assert [(s.id.rank, s.events_endpoint, s.replay_endpoint) for s in streams] == [
        (0, "tcp://127.0.0.1:5557", "tcp://127.0.0.1:5558"),
        (1, "tcp://127.0.0.1:5558", "tcp://127.0.0.1:5559"),
    ]
    assert streams[0].topic == b"kv-events"


def test_it_lists_engines_as_json(redis_client) -> None:
    _run(*ADD)
    listed = json.loads(_run("list", "--json"))
    assert listed[0]["pod"] == "vllm-0.default"
    assert listed[0]["replay_endpoint"] == "tcp://127.0.0.1:5558"


@pytest.mark.parametrize(
    ("flag", "value", "named"),
    [
        ("--pod", "Vllm_0", "--pod"),
        ("--pod", "vllm-0", "--pod"),
        ("--events", "http://x:1", "--events-endpoint"),
        ("--events", "tcp://host", "--events-endpoint"),
        ("--dp-size", "0", "--dp-size"),
        ("--block-size", "0", "--block-size"),
    ],
)
def test_it_rejects_bad_arguments_naming_the_field(flag, value, named, redis_client) -> None:
    args = list(ADD)
    args[args.index(flag) + 1] = value
    with pytest.raises(CommandError, match=named):
        _run(*args)
    assert not Engine.objects.exists()


def test_it_refuses_a_duplicate_pod(redis_client) -> None:
    _run(*ADD)
    with pytest.raises(CommandError, match="--pod"):
        _run(*ADD)


def test_removing_an_unknown_pod_fails(redis_client) -> None:
    with pytest.raises(CommandError, match="no engine"):
        _run("remove", "--pod", "nope-0.default")
