"""One Decision under the API's names: the log's entries from before (`id`, `n_tokens`,
`n_blocks`) still read, and clients get the answer they got before, byte for byte."""

import json

import pytest

from kvadmin.api.answers import json_answer
from kvadmin.routing import decisions, outcomes
from kvadmin.routing.decisions import CandidateEstimate, Decision, Dropped, PodExplanation
from scoring.keys import DECISION_IDS_KEY, DECISIONS_KEY

pytestmark = pytest.mark.django_db

OLD_ENTRY = (
    '{"id":"d1f00d","ts":1780000000.5,"request_id":"req-1","model":"m/a","input":"prompt",'
    '"n_tokens":64,"n_blocks":4,"first_block":12345,"longest_match":3,"candidates":["p0","p1"],'
    '"chosen":"p0","tie_break":false,"scores":[{"pod":"p0","score":70,"matched_blocks":3,'
    '"weighted_sum":2.8,"media":{"GPU":2,"CPU":1},"runs":[["GPU",2],["CPU",1]]}],'
    '"dropped":{"non_candidates":["p9"],"stale":[]},"weights_version":3,'
    '"weights":{"GPU":1.0,"CPU":0.8},"timings_ms":{"total":0.2},"tokenizer":"local",'
    '"tokenizer_fallback":"template","policy":"ttft","reason":"cheapest","estimates":[{"pod":"p0",'
    '"matched_blocks":3,"speculative_blocks":0,"cached_tokens":48,"uncached_tokens":16,'
    '"wait_s":0.0,"queue_wait_s":0.0,"engine_waiting":null,"prefill_s":0.01,"reload_s":0.0,'
    '"work_penalty_s":0.0,"cost_s":0.01,"load_stale":true,"running":0,"runs":[["GPU",3]]}],'
    '"stale_loads":["p0"],"requester":"token:7"}'
)
"""A decision as the log wrote it before it took the API's names (kvadmin 7742574)."""

OLD_MINIMAL_ENTRY = (
    '{"id":"d01d","ts":1.0,"request_id":null,"model":"m/a","input":"token_ids","n_tokens":32,'
    '"n_blocks":2,"first_block":9,"longest_match":0,"candidates":["p0"],"chosen":"p0",'
    '"tie_break":true,"scores":[],"dropped":{"non_candidates":[],"stale":[]},'
    '"weights_version":1,"weights":{},"timings_ms":{"total":0.1}}'
)
"""One from before policies and requesters were recorded: every default left out."""

ANSWER = (
    b'{"decision_id":"d1f00d","ts":1780000000.5,"request_id":"req-1","model":"m/a",'
    b'"input":"prompt","tokens":64,"blocks":4,"first_block":12345,"longest_match":3,'
    b'"candidates":["p0","p1"],"chosen":"p0","tie_break":false,"scores":[{"pod":"p0",'
    b'"score":70,"matched_blocks":3,"weighted_sum":2.8,"media":{"GPU":2,"CPU":1},'
    b'"runs":[["GPU",2],["CPU",1]]}],"dropped":{"non_candidates":["p9"],"stale":[]},'
    b'"weights_version":3,"weights":{"GPU":1.0,"CPU":0.8},"timings_ms":{"total":0.2},'
    b'"tokenizer":"local","tokens_estimated":false,"policy":"ttft","reason":"cheapest",'
    b'"estimates":[{"pod":"p0","matched_blocks":3,"speculative_blocks":0,"cached_tokens":48,'
    b'"uncached_tokens":16,"wait_s":0.0,"queue_wait_s":0.0,"engine_waiting":null,'
    b'"prefill_s":0.01,"reload_s":0.0,"work_penalty_s":0.0,"cost_s":0.01,"load_stale":true,'
    b'"running":0,"queued":0.0,"wait_factor":1.0,"prefill_factor":1.0,"prefill_offset_s":0.0,'
    b'"runs":[["GPU",3]]}],'
    b'"stale_loads":["p0"],'
    b'"predicted":{"available_tokens":48,'
    b'"achieved_tokens":48,"ttft_ms":10.0},"delivered":null}'
)
"""What kvadmin 7742574 answered for OLD_ENTRY (GET /api/v1/decisions, with the default
block size of 16), with the four fields the wait estimate added to each estimate since
(`queued`, `wait_factor`, `prefill_factor` and `prefill_offset_s`, at the values an old entry
reads as)."""

MINIMAL_ANSWER = (
    b'{"decision_id":"d01d","ts":1.0,"request_id":null,"model":"m/a","input":"token_ids",'
    b'"tokens":32,"blocks":2,"first_block":9,"longest_match":0,"candidates":["p0"],'
    b'"chosen":"p0","tie_break":true,"scores":[],"dropped":{"non_candidates":[],"stale":[]},'
    b'"weights_version":1,"weights":{},"timings_ms":{"total":0.1},"tokenizer":"",'
    b'"tokens_estimated":false,"policy":"kthena","reason":"","estimates":[],"stale_loads":[],'
    b'"predicted":{"available_tokens":0,"achieved_tokens":0,"ttft_ms":null},"delivered":null}'
)


def _decision() -> Decision:
    """OLD_ENTRY's decision, made today."""
    return Decision(
        decision_id="d1f00d",
        ts=1780000000.5,
        request_id="req-1",
        model="m/a",
        input="prompt",
        tokens=64,
        blocks=4,
        first_block=12345,
        longest_match=3,
        candidates=["p0", "p1"],
        chosen="p0",
        tie_break=False,
        scores=[
            PodExplanation(
                pod="p0",
                score=70,
                matched_blocks=3,
                weighted_sum=2.8,
                media={"GPU": 2, "CPU": 1},
                runs=[("GPU", 2), ("CPU", 1)],
            )
        ],
        dropped=Dropped(non_candidates=["p9"], stale=[]),
        weights_version=3,
        weights={"GPU": 1.0, "CPU": 0.8},
        timings_ms={"total": 0.2},
        tokenizer="local",
        tokenizer_fallback="template",
        policy="ttft",
        reason="cheapest",
        estimates=[
            CandidateEstimate(
                pod="p0",
                matched_blocks=3,
                speculative_blocks=0,
                cached_tokens=48,
                uncached_tokens=16,
                wait_s=0.0,
                queue_wait_s=0.0,
                engine_waiting=None,
                prefill_s=0.01,
                reload_s=0.0,
                work_penalty_s=0.0,
                cost_s=0.01,
                load_stale=True,
                runs=[("GPU", 3)],
            )
        ],
        stale_loads=["p0"],
        requester="token:7",
    )


def test_a_decision_is_answered_in_the_bytes_clients_got_before() -> None:
    assert json_answer(outcomes.decision_answer(_decision())).body == ANSWER


def test_the_log_keeps_what_the_answer_leaves_out() -> None:
    entry = json.loads(decisions.encode(_decision()))
    assert entry["decision_id"] == "d1f00d" and (entry["tokens"], entry["blocks"]) == (64, 4)
    assert (entry["requester"], entry["tokenizer_fallback"]) == ("token:7", "template")
    assert "log_id" not in entry
    answered = json.loads(ANSWER)
    assert not {"requester", "tokenizer_fallback", "log_id"} & answered.keys()


def test_an_entry_logged_under_the_old_names_reads_back(redis_client) -> None:
    log_id = redis_client.xadd(DECISIONS_KEY, {"d": OLD_ENTRY})
    [read] = decisions.recent(10, client=redis_client)
    assert read == decisions.get(log_id, client=redis_client)
    assert read.log_id == log_id
    assert (read.decision_id, read.tokens, read.blocks) == ("d1f00d", 64, 4)
    assert (read.requester, read.tokenizer_fallback) == ("token:7", "template")
    assert json_answer(outcomes.decision_answer(read)).body == ANSWER


def test_the_api_lists_old_entries_as_it_did(client, token, redis_client) -> None:
    redis_client.xadd(DECISIONS_KEY, {"d": OLD_MINIMAL_ENTRY})
    redis_client.xadd(DECISIONS_KEY, {"d": OLD_ENTRY})
    response = client.get("/api/v1/decisions", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200
    assert response.content == b'{"decisions":[' + ANSWER + b"," + MINIMAL_ANSWER + b"]}"


def test_an_old_entry_takes_its_outcome(client, token, redis_client) -> None:
    """Logged before requesters were: any scoring token may report it, found by its old id."""
    log_id = redis_client.xadd(DECISIONS_KEY, {"d": OLD_MINIMAL_ENTRY})
    redis_client.zadd(DECISION_IDS_KEY, {"d01d": int(log_id.partition("-")[0])})  # as recorded
    response = client.post(
        "/api/v1/decisions/d01d/outcome",
        data=json.dumps({"cached_tokens": 16, "prompt_tokens": 32}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert response.status_code == 201, response.content
    assert outcomes.outcomes_of(redis_client, ["d01d"])["d01d"].cached_tokens == 16


def test_an_entry_that_is_neither_shape_is_still_skipped(redis_client) -> None:
    redis_client.xadd(DECISIONS_KEY, {"d": '{"id": "x", "n_tokens": 1}'})
    redis_client.xadd(DECISIONS_KEY, {"d": OLD_ENTRY.replace('"n_blocks":4', '"n_blocks":"4"')})
    assert decisions.recent(10, client=redis_client) == []
