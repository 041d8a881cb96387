"""`engines add --tokenizer PATH` names a model's local tokenizer; a path that holds none, or a
second tokenizer for the same model, is refused naming the field."""

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from kvadmin.engines.models import Engine
from kvadmin.model_tokenizer.bundled import deepseek_v4_files

pytestmark = pytest.mark.django_db(transaction=True)


def _add(pod: str, tokenizer: str, model: str = "deepseek-ai/DeepSeek-V4-Flash") -> None:
    call_command(
        "engines",
        *("add", "--pod", pod, "--model", model, "--kind", "vllm"),
        *("--events", "tcp://127.0.0.1:5557", "--tokenizer", tokenizer),
    )


def test_it_registers_the_models_tokenizer(redis_client, deepseek_v4) -> None:
    _add("vllm-0.default", deepseek_v4)
    _add("vllm-1.default", deepseek_v4)  # the same tokenizer again is fine
    assert Engine.objects.get(pod="vllm-1.default").as_dict()["tokenizer"] == deepseek_v4


def test_a_tokenizer_json_file_will_do(redis_client) -> None:
    path = str(deepseek_v4_files() / "tokenizer.json")
    _add("vllm-0.default", path)
    assert Engine.objects.get().tokenizer == path


@pytest.mark.parametrize("path", ["relative/tokenizer.json", "/nonexistent/tokenizer.json"])
def test_it_refuses_a_path_without_a_tokenizer(path, redis_client) -> None:
    with pytest.raises(CommandError, match="--tokenizer: .*not an absolute path"):
        _add("vllm-0.default", path)


def test_it_refuses_a_second_tokenizer_for_one_model(redis_client, deepseek_v4) -> None:
    _add("vllm-0.default", deepseek_v4)
    other = str(deepseek_v4_files() / "tokenizer.json")
    with pytest.raises(CommandError, match="--tokenizer: vllm-0.default serves .* another"):
        _add("vllm-1.default", other)
    _add("vllm-1.default", other, model="another/model")  # another model may
