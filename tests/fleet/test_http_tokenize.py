"""`POST /tokenize` on a real simulated pod server, in vLLM's and SGLang's shapes (compatibility.md
2.6)."""

from kvadmin.fleet.tokenizer import Message, encode, encode_chat
from tests.conftest import http_json
from tests.fleet.conftest import StartFleet, local_config

MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {
        "role": "user",
        "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "there"}],
    },
]


def test_vllm_tokenizes_a_prompt_with_its_response_shape(start_fleet: StartFleet) -> None:
    pod = start_fleet(local_config(max_model_len=4096)).pods[0]
    body = {"model": pod.model, "prompt": "Hello, world", "add_special_tokens": True}
    status, answer = http_json(
        f"{pod.config.http_url}/tokenize", body | {"return_token_strs": False}
    )
    assert status == 200
    assert answer == {
        "count": len(encode("Hello, world")),
        "max_model_len": 4096,
        "tokens": encode("Hello, world"),
        "token_strs": None,
    }


def test_vllm_applies_the_chat_template_to_messages(start_fleet: StartFleet) -> None:
    pod = start_fleet(local_config()).pods[0]
    body = {
        "model": pod.model,
        "messages": MESSAGES,
        "add_special_tokens": False,
        "add_generation_prompt": True,
        "return_token_strs": False,
    }
    _, answer = http_json(f"{pod.config.http_url}/tokenize", body)
    expected = encode_chat([Message("system", "You are terse."), Message("user", "Hi\nthere")])
    assert answer["tokens"] == expected
    _, bare = http_json(f"{pod.config.http_url}/tokenize", body | {"add_generation_prompt": False})
    assert answer["tokens"][: len(bare["tokens"])] == bare["tokens"]
    assert len(bare["tokens"]) < len(answer["tokens"])


def test_sglang_answers_without_token_strs_and_accepts_a_batch(start_fleet: StartFleet) -> None:
    pod = start_fleet(local_config("sglang-0.default", "sglang")).pods[0]
    url = f"{pod.config.http_url}/tokenize"
    _, one = http_json(url, {"model": pod.model, "prompt": "abc", "add_special_tokens": True})
    assert one == {"tokens": encode("abc"), "count": len(encode("abc")), "max_model_len": 32768}
    _, chat = http_json(
        url, {"model": pod.model, "messages": MESSAGES, "add_special_tokens": False}
    )
    assert chat["tokens"][0] == encode("x")[0]  # the template's BOS, not a doubled one
    _, batch = http_json(url, {"prompt": ["a", "b c"]})
    assert batch["tokens"] == [encode("a"), encode("b c")]
    assert batch["count"] == [2, 3]


def test_add_special_tokens_false_leaves_out_the_bos(start_fleet: StartFleet) -> None:
    pod = start_fleet(local_config()).pods[0]
    url = f"{pod.config.http_url}/tokenize"
    _, answer = http_json(url, {"prompt": "abc", "add_special_tokens": False})
    assert answer["tokens"] == encode("abc", add_special_tokens=False)


def test_errors_come_in_each_engines_error_shape(start_fleet: StartFleet) -> None:
    fleet = start_fleet(local_config(), local_config("sglang-0.default", "sglang"))
    vllm, sglang = (pod.config.http_url for pod in fleet.pods)
    status, answer = http_json(f"{vllm}/tokenize", {"model": "other/model", "prompt": "x"})
    assert status == 404
    assert answer["error"]["code"] == 404 and "other/model" in answer["error"]["message"]
    status, answer = http_json(f"{sglang}/tokenize", {"prompt": 7})
    assert (status, answer["object"], answer["code"]) == (400, "error", 400)
    status, _ = http_json(f"{vllm}/tokenize", b"{not json")
    assert status == 400
