"""Through the real ASGI server: a model registered with a tokenizer is scored from its local
ids, and the decision log says which tokenizer produced them."""

from tokenizers import Tokenizer

from kvadmin.api.models import ApiToken
from kvadmin.engines.models import Engine
from kvadmin.model_tokenizer.bundled import deepseek_v4_files
from tests.conftest import http_json
from tests.routing.conftest import dead_url, hold

# The model whose tokenizer kvadmin bundles: the test is about tokenizing locally.
DEEPSEEK = "deepseek-ai/DeepSeek-V4-Flash"
PROMPT = "Served by uvicorn: does the router tokenize 毕老师's long prompt itself? " * 4


def test_the_api_scores_a_prompt_with_the_local_tokenizer(
    asgi_server, transactional_db, redis_client, deepseek_v4
) -> None:
    Engine.objects.create(
        pod="vllm-0.default",
        model=DEEPSEEK,
        events_endpoint="tcp://127.0.0.1:5557",
        http_base_url=dead_url(),  # nothing could answer /tokenize
        tokenizer=deepseek_v4,
    )
    _, token = ApiToken.issue("gateway", "score decisions:read")
    ids = Tokenizer.from_file(str(deepseek_v4_files() / "tokenizer.json")).encode(PROMPT).ids
    hold(redis_client, "vllm-0.default", ids, ["GPU", "GPU"], model=DEEPSEEK)

    status, answer = http_json(
        f"{asgi_server}/api/v1/score", {"model": DEEPSEEK, "prompt": PROMPT}, token
    )

    assert status == 200, answer
    assert answer["tokenizer"] == "local" and answer["tokens"] == len(ids)
    assert answer["chosen"] == "vllm-0.default"
    assert answer["scores"][0]["matched_blocks"] == 2
    status, logged = http_json(f"{asgi_server}/api/v1/decisions?limit=1", token=token)
    assert status == 200, logged
    assert logged["decisions"][0]["tokenizer"] == "local"
