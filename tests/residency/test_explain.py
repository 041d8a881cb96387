"""/explain/: the block grid of one request and the score arithmetic per pod, identical to
what POST /api/v1/score answers for the same input."""

import html
import json
import re

import pytest
from django.test import override_settings

from kvadmin.api.models import ApiToken
from kvadmin.routing import decisions
from scoring.keys import stream_status_key
from tests.index import MODEL, NOW, block_tokens
from tests.residency.conftest import register

pytestmark = pytest.mark.django_db

PODS = ("vllm-0.default", "vllm-1.default", "vllm-2.default")


def request_tokens(blocks: int) -> list[int]:
    return [t for n in range(blocks) for t in block_tokens(n)]


@pytest.fixture
def fleet_index(index, redis_client):
    """Three engines; vllm-0 holds 6 of the request's 8 blocks in GPU then CPU, vllm-1 holds 3
    in GPU but restarted after writing the third, vllm-2 nothing; vllm-9 (not registered)
    holds the first 2."""
    for pod in PODS:
        register(pod)
    index.store("vllm-0.default", range(6), at=NOW)
    index.offload("vllm-0.default", range(4, 6), "CPU", at=NOW + 1)
    index.remove("vllm-0.default", range(4, 6), "GPU", at=NOW + 2)
    index.store("vllm-1.default", range(2), at=NOW)
    index.store("vllm-1.default", [2], at=NOW + 50)
    redis_client.hset(stream_status_key("vllm-1.default", 0), "started_at", NOW + 50)
    index.store("vllm-9.default", range(2), at=NOW)
    return index


def _api(client, body: dict) -> dict:
    """What POST /api/v1/score answers."""
    token = ApiToken.issue(f"gateway-{ApiToken.objects.count()}")[1]
    response = client.post(
        "/api/v1/score",
        data=json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert response.status_code == 200, response.content
    return json.loads(response.content)


def _page_api(page_html: str) -> dict:
    found = re.search(r'<pre id="api-json">(.*?)</pre>', page_html, re.S)
    assert found, "no explanation on the page"
    return json.loads(html.unescape(found.group(1)))


def _comparable(answer: dict) -> dict:
    """Everything but what differs per call: id, time, timings, where the ids came from
    (the second call finds the first one's in the token cache), and the TTFT estimates and
    the reason quoting them and the predicted TTFT: they price each pod's virtual queue at the
    moment of the call, and every recorded API call advances its pod's queue (an explain page
    does not)."""
    skipped = ("decision_id", "ts", "timings_ms", "tokenizer", "estimates", "reason")
    comparable = {k: v for k, v in answer.items() if k not in skipped}
    if "predicted" in comparable:
        comparable["predicted"] = {
            k: v for k, v in comparable["predicted"].items() if k != "ttft_ms"
        }
    return comparable


def test_it_scores_like_the_api_for_token_ids(browsing, fleet_index) -> None:
    request = request_tokens(8)

    response = browsing.post(
        "/explain/", {"model": MODEL, "input": "token_ids", "text": ", ".join(map(str, request))}
    )

    assert response.status_code == 200
    shown = _page_api(response.text)
    assert _comparable(shown) == _comparable(_api(browsing, {"model": MODEL, "token_ids": request}))
    assert shown["chosen"] == "vllm-0.default"
    assert len(decisions.recent(10)) == 1  # the API's; the page records none
    assert 'int(5.6 / 8 &times; 100) = <strong class="score">70</strong>' in response.text


def test_the_arithmetic_adds_each_run_of_media_in_block_order(browsing, fleet_index) -> None:
    text = json.dumps(request_tokens(8))

    page = browsing.post("/explain/", {"model": MODEL, "input": "token_ids", "text": text}).text

    row = page.split('<tr class="score-row" data-pod="vllm-0.default">')[1].split("</tr>")[0]
    assert "4 &times; 1 <span" in row and "2 &times; 0.8 <span" in row
    assert '<span class="weighted-sum">5.6</span>' in row
    assert "6 of 8 blocks, stops at block 6" in row
    assert "Dropped as stale (written at or before their pod's last start): vllm-1.default" in page
    assert "not candidates: vllm-9.default" in page


def test_the_grid_colours_each_pods_blocks_by_medium(browsing, fleet_index) -> None:
    text = " ".join(map(str, request_tokens(8)))

    page = browsing.post("/explain/", {"model": MODEL, "input": "token_ids", "text": text}).text

    def cells(pod: str) -> list[str]:
        row = page.split(f'<tr data-pod="{pod}">')[1].split("</tr>")[0]
        return re.findall(r'<td class="cell ([^"]*)"', row)

    assert cells("vllm-0.default") == [
        *["m-gpu matched"] * 4,
        "m-cpu matched",
        "m-cpu matched stop",
        "",
        "",
    ]
    assert cells("vllm-1.default")[:4] == ["m-gpu", "m-gpu", "m-gpu", ""]  # stale: no run
    assert cells("vllm-2.default") == [""] * 8
    assert cells("vllm-9.default")[:3] == ["m-gpu", "m-gpu", ""]
    assert "(not a candidate)" in page.split('<tr data-pod="vllm-9.default">')[1].split("</tr>")[0]


def test_explaining_is_not_recorded_as_a_decision(browsing, fleet_index) -> None:
    browsing.post("/explain/", {"model": MODEL, "input": "token_ids", "text": "1, 2, 3"})

    assert decisions.recent(10) == []


def test_candidate_pods_narrow_the_scoring(browsing, fleet_index) -> None:
    text = json.dumps(request_tokens(8))
    form = {"model": MODEL, "input": "token_ids", "text": text, "pods": "vllm-2.default"}

    shown = _page_api(browsing.post("/explain/", form).text)

    assert shown["candidates"] == ["vllm-2.default"] and shown["scores"] == []


def test_a_prompt_is_tokenized_by_the_models_engines(browsing, index, tokenizing_pod) -> None:
    register(**tokenizing_pod("vllm-5.default").engine_fields())
    prompt = "The quick brown fox jumps over the lazy dog. " * 12

    response = browsing.post("/explain/", {"model": MODEL, "input": "prompt", "text": prompt})

    shown = _page_api(response.text)
    assert _comparable(shown) == _comparable(_api(browsing, {"model": MODEL, "prompt": prompt}))
    assert shown["input"] == "prompt" and shown["blocks"] > 1
    assert response.text.count('<td class="cell') == shown["blocks"]
    assert "may not match" not in response.text


def test_bad_token_ids_are_a_clear_error_and_nothing_is_scored(browsing, fleet_index) -> None:
    response = browsing.post("/explain/", {"model": MODEL, "input": "token_ids", "text": "1, two"})

    assert response.status_code == 200
    assert "token ids are non-negative integers" in response.text
    assert 'id="api-json"' not in response.text


def test_the_score_service_errors_name_the_field(browsing, fleet_index) -> None:
    unknown = browsing.post(
        "/explain/", {"model": MODEL, "input": "token_ids", "text": "1", "pods": "nobody.ns"}
    )
    negative = browsing.post("/explain/", {"model": MODEL, "input": "token_ids", "text": "[-1]"})
    chat = browsing.post("/explain/", {"model": MODEL, "input": "messages", "text": "{"})

    assert "unknown candidate pods" in unknown.text
    assert "token ids are integers" in negative.text
    assert "messages must be JSON" in chat.text


def test_a_model_no_engine_serves_cannot_be_chosen(browsing, fleet_index) -> None:
    response = browsing.post(
        "/explain/", {"model": "other/model", "input": "token_ids", "text": "1"}
    )

    assert "Select a valid choice" in response.text


def test_chat_messages_and_multiline_prompts_score_as_the_api_receives_them(
    browsing, index, tokenizing_pod
) -> None:
    register(**tokenizing_pod("vllm-5.default").engine_fields())
    messages = [
        {"role": "system", "content": "You are terse. " * 10},
        {"role": "user", "content": [{"type": "text", "text": "Sum 2 and 2."}]},
    ]

    chat = browsing.post(
        "/explain/", {"model": MODEL, "input": "messages", "text": json.dumps(messages)}
    )
    # A browser submits a textarea's line breaks as CRLF; the operator typed LF.
    typed = browsing.post(
        "/explain/", {"model": MODEL, "input": "prompt", "text": "one line\r\nand another"}
    )

    expected = _api(browsing, {"model": MODEL, "messages": messages})
    assert _comparable(_page_api(chat.text)) == _comparable(expected)
    prompt = _api(browsing, {"model": MODEL, "prompt": "one line\nand another"})
    assert _comparable(_page_api(typed.text)) == _comparable(prompt)
    assert "may not match" not in chat.text + typed.text
    assert [e["wait_s"] for e in _page_api(typed.text)["estimates"]] == [0.0]  # none queued


@override_settings(KVADMIN={"TOKENIZER_CHECK_EVERY": 0})
def test_the_grid_is_over_the_blocks_scoring_hashed(browsing, index, deepseek_v4) -> None:
    """A model tokenized in-process, by engines that serve no /tokenize: the grid's columns
    are the block hashes the score came from, not a second tokenization."""
    register("vllm-5.default", tokenizer=deepseek_v4)
    prompt = "Explain which pod holds the prefix of this prompt, block by block. " * 8

    response = browsing.post("/explain/", {"model": MODEL, "input": "prompt", "text": prompt})

    shown = _page_api(response.text)
    assert shown["tokenizer"] == "local" and shown["blocks"] > 1
    assert response.text.count('<th scope="col" title="block ') == shown["blocks"]
    assert 'role="alert"' not in response.text
