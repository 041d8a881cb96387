"""One rule for model names, enforced where they enter the registry: the model (and so the
admin) and `manage.py engines add`."""

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from kvadmin.engines.model_names import MAX_LENGTH, model_name_problem
from kvadmin.engines.models import Engine

pytestmark = pytest.mark.django_db

# Literal names, not tests.index.MODEL: these tests are about which names pass the rule.
BAD = ["a\nb", "a\tb", "a\x7fb", "a\u202eb", "a\ufeffb", "", " ", "Qwen/Qwen3-8B ", "m" * 256]
GOOD = [
    "Qwen/Qwen3-8B",
    "meta-llama/Llama-3.1-8B-Instruct",
    "Mistral 7B v0.3",
    "模型/七号",
    "m" * 255,
]


@pytest.mark.parametrize("name", BAD)
def test_bad_names_are_named_as_such(name) -> None:
    assert model_name_problem(name)


@pytest.mark.parametrize("name", GOOD)
def test_printable_names_up_to_the_limit_are_fine(name) -> None:
    assert model_name_problem(name) is None and len(name) <= MAX_LENGTH


@pytest.mark.parametrize("name", BAD)
def test_the_registry_refuses_them(name) -> None:
    engine = Engine(pod="vllm-0.default", model=name, kind="vllm", events_endpoint="tcp://h:5557")
    with pytest.raises(ValidationError) as raised:
        engine.full_clean()
    assert "model" in raised.value.message_dict


def test_engines_add_refuses_a_newline_in_the_model() -> None:
    with pytest.raises(CommandError, match="model"):
        call_command(
            "engines",
            "add",
            "--pod",
            "vllm-0.default",
            "--model",
            "Qwen/Qwen3-8B\nx",
            "--kind",
            "vllm",
            "--events",
            "tcp://10.0.0.5:5557",
        )
    assert not Engine.objects.exists()


def test_the_admin_form_refuses_it(admin_client) -> None:
    response = admin_client.post(
        "/admin/engines/engine/add/",
        {
            "pod": "vllm-0.default",
            "model": "a\x1bb",
            "kind": "vllm",
            "events_endpoint": "tcp://10.0.0.5:5557",
            "dp_size": 1,
            "block_size": 16,
            "enabled": "on",
        },
    )
    assert response.status_code == 200 and "control or invisible" in response.text
    assert not Engine.objects.exists()
