"""`engines add --tokenizer PATH` names a model's local tokenizer; a path that holds none, or a
second tokenizer for the same model, is refused naming the field."""

import json

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError

from kvadmin.engines.models import Engine
from kvadmin.model_tokenizer import files
from kvadmin.model_tokenizer.bundled import deepseek_v4_files
from kvadmin.model_tokenizer.files import TokenizerUnavailable

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
    with pytest.raises(
        CommandError, match="--tokenizer: .*not an absolute path to a tokenizer.json that loads"
    ):
        _add("vllm-0.default", path)


def test_it_refuses_a_second_tokenizer_for_one_model(redis_client, deepseek_v4) -> None:
    _add("vllm-0.default", deepseek_v4)
    other = str(deepseek_v4_files() / "tokenizer.json")
    with pytest.raises(CommandError, match="--tokenizer: vllm-0.default serves .* another"):
        _add("vllm-1.default", other)
    _add("vllm-1.default", other, model="another/model")  # another model may


SECRET = "root:x:0:0:SECRET-CONTENT"


@pytest.fixture
def not_tokenizers(tmp_path) -> list[str]:
    """Files that are not tokenizers: any readable file, JSON quoting a secret, a directory."""
    quoting = tmp_path / "quoting" / "tokenizer.json"
    quoting.parent.mkdir()
    quoting.write_text(json.dumps({"version": "1.0", "model": {"type": SECRET}}))
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe" + SECRET.encode())
    return ["/etc/passwd", str(quoting), str(quoting.parent), str(binary), "/dev/null"]


def test_the_command_refuses_a_file_that_is_no_tokenizer_without_quoting_it(
    not_tokenizers, redis_client
) -> None:
    for path in not_tokenizers:
        with pytest.raises(CommandError) as refused:
            _add("vllm-0.default", path)
        assert "that loads as a tokenizer" in str(refused.value)
        assert "SECRET" not in str(refused.value) and "root:" not in str(refused.value)
    assert not Engine.objects.exists()


def test_no_save_keeps_a_path_that_is_no_tokenizer(not_tokenizers, redis_client) -> None:
    for path in not_tokenizers:
        engine = Engine(
            pod="vllm-0.default", model="m", events_endpoint="tcp://127.0.0.1:5557", tokenizer=path
        )
        with pytest.raises(ValidationError):
            engine.save()
    assert not Engine.objects.exists()


def test_the_admin_refuses_it_with_the_fixed_message(not_tokenizers, admin_client) -> None:
    for path in not_tokenizers:
        response = admin_client.post(
            "/admin/engines/engine/add/",
            {
                "pod": "vllm-0.default",
                "model": "m",
                "kind": "vllm",
                "events_endpoint": "tcp://127.0.0.1:5557",
                "topic": "",
                "dp_size": 1,
                "block_size": 16,
                "tokenizer": path,
                "enabled": "on",
            },
        )
        page = response.content.decode()
        assert response.status_code == 200 and "that loads as a tokenizer" in page
        assert "SECRET" not in page
    assert not Engine.objects.exists()


def test_a_load_error_names_the_file_not_what_it_holds(not_tokenizers) -> None:
    for path in not_tokenizers[1:4]:
        with pytest.raises(TokenizerUnavailable) as failed:
            files.load(path)
        assert "SECRET" not in str(failed.value)
