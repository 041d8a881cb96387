"""`manage.py score` explains a decision to an operator, as the API would answer it."""

import io
import json

import pytest
from django.core.management import CommandError, call_command

from kvadmin.routing import decisions
from tests.index import MODEL
from tests.routing.conftest import PODS, hold, request_tokens

pytestmark = pytest.mark.django_db


def _run(*args: str) -> str:
    out = io.StringIO()
    call_command("score", *args, stdout=out)
    return out.getvalue()


def _ids(token_ids: list[int]) -> str:
    return ",".join(map(str, token_ids))


def test_it_explains_the_choice_per_pod_and_medium(engines, redis_client) -> None:
    request = request_tokens(4)
    hold(redis_client, PODS[0], request, ["GPU", "GPU", "CPU"])
    output = _run("--model", MODEL, "--token-ids", _ids(request))
    assert f"chosen: {PODS[0]}" in output
    assert "GPU:2 CPU:1" in output
    assert "2xGPU@1 + 1xCPU@0.8 = 2.8; / 4 x 100 = 70 -> 70" in output
    assert f"{PODS[1]}" in output and "does not hold the first block" in output
    assert len(decisions.recent(10)) == 1


def test_json_prints_the_api_answer(engines, redis_client) -> None:
    answer = json.loads(_run("--model", MODEL, "--token-ids", "1,2,3", "--json", "--no-record"))
    assert answer["blocks"] == 1 and answer["chosen"] in PODS
    assert decisions.recent(10) == []


def test_it_limits_the_candidates(engines, redis_client) -> None:
    output = _run("--model", MODEL, "--token-ids", "1,2", "--pods", f"{PODS[2]}", "--json")
    assert json.loads(output)["candidates"] == [PODS[2]]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", MODEL, "--token-ids", "1,x"], "comma-separated integers"),
        (["--model", MODEL, "--token-ids", "1,-2"], "token_ids"),
        (["--model", "nobody", "--token-ids", "1"], "no enabled engine"),
        (["--model", MODEL, "--token-ids", "1", "--pods", "ghost-0.x"], "ghost-0.x"),
        (["--model", MODEL, "--messages", "[{"], "not JSON"),
    ],
)
def test_bad_input_is_a_clear_error(engines, redis_client, args, message) -> None:
    with pytest.raises(CommandError, match=message):
        _run(*args)
