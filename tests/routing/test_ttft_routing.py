"""POST /api/v1/score under the `ttft` policy, through the real service and Redis: the virtual
queue spreads a hot prefix only when its wait outweighs the prefix, speculative entries keep a
burst on one pod until then, the engines' load resyncs the wait or is flagged stale, and the
`kthena` policy keeps kthena's pick."""

import time

import pytest
import redis
from django.core.management import CommandError, call_command

from kvadmin.routing import decisions, service
from scoring.choice import choose, tie_break
from scoring.index import WALK
from scoring.keys import in_flight_key, load_key, queue_key, speculative_key, speculative_keys
from scoring.route_record import RECORD
from tests.index import MODEL
from tests.routing.conftest import PODS, hold, request_tokens
from tests.scoring.speculative_data import speculative_of

pytestmark = pytest.mark.django_db


def estimate(answer: dict, pod: str) -> dict:
    return next(e for e in answer["estimates"] if e["pod"] == pod)


def test_a_burst_sticks_to_one_pod_until_its_queue_outweighs_the_prefix(
    post_score, engines, redis_client
) -> None:
    """3,072-token requests whose 128 hashed blocks (2,048 tokens) are the same: nobody holds
    them, so the first ties everywhere. Its speculative entries then make its pod the only one
    with the prefix; each request routed there adds ~0.12 s of prefill to its queue, and the
    prefix saves ~0.2 s per request (x 2.5 with the idle pods' work penalty). The second and
    third requests see at most 0.32 s and 0.44 s of queue whatever the timing: they stick. Once
    the queue outweighs ~0.5 s, the next request goes to an idle pod."""
    request = request_tokens(192)
    _, first = post_score({"model": MODEL, "token_ids": request})
    hot = first["chosen"]
    assert first["tie_break"] is True
    answers = [post_score({"model": MODEL, "token_ids": request})[1] for _ in range(2)]
    for answer in answers:
        assert answer["chosen"] == hot and answer["tie_break"] is False
        held = estimate(answer, hot)
        assert (held["speculative_blocks"], held["cached_tokens"]) == (128, 2048)
        assert held["wait_s"] > 0 and held["cost_s"] < answer["estimates"][1]["cost_s"]
    for _ in range(12):
        _, answer = post_score({"model": MODEL, "token_ids": request})
        if answer["chosen"] != hot:
            break
    else:
        pytest.fail("the burst never left its pod, however long the queue grew")
    left = estimate(answer, hot)
    assert left["wait_s"] > 0.4 and left["cost_s"] > answer["estimates"][0]["cost_s"]
    # The two idle pods price alike: rendezvous hashing picks between them, not the queue.
    assert answer["tie_break"] is True and answer["reason"].startswith("2 pods tie")


def test_without_speculative_entries_the_same_burst_scatters(
    post_score, engines, redis_client, settings
) -> None:
    """Proof the entries are what keep the burst together: with a 0 s TTL the second request
    sees its prefix nowhere and the first pod's queue sends it away at once."""
    settings.KVADMIN = {"ROUTING_SPECULATIVE_SECONDS": 0.0}
    request = request_tokens(192)
    _, first = post_score({"model": MODEL, "token_ids": request})
    _, second = post_score({"model": MODEL, "token_ids": request})
    assert second["chosen"] != first["chosen"]
    assert estimate(second, first["chosen"])["speculative_blocks"] == 0
    assert redis_client.exists(*speculative_keys(MODEL)) == 0


def test_the_chosen_pods_state_advances_with_the_decision(
    post_score, engines, redis_client
) -> None:
    request = request_tokens(128)
    before_ms = time.time() * 1000
    _, answer = post_score({"model": MODEL, "token_ids": request, "request_id": "r-7"})
    pod, prefill = answer["chosen"], estimate(answer, answer["chosen"])["prefill_s"]
    busy_until = float(redis_client.hget(queue_key(pod), "busy_until_ms"))
    assert before_ms + prefill * 1000 <= busy_until <= time.time() * 1000 + prefill * 1000
    assert redis_client.zscore(in_flight_key(pod), answer["decision_id"]) == busy_until
    assert len(speculative_of(redis_client, pod)) == 128
    assert 0 < redis_client.pttl(speculative_key(MODEL)) <= 5000
    for other in PODS:
        if other != pod:
            assert not redis_client.exists(queue_key(other))
            assert speculative_of(redis_client, other) == {}
    logged = decisions.recent(1, client=redis_client)[0]
    assert logged.decision_id == answer["decision_id"]
    assert (logged.policy, logged.reason) == ("ttft", answer["reason"])
    assert [e.pod for e in logged.estimates] == [e["pod"] for e in answer["estimates"]]


def test_the_kthena_policy_picks_what_kthena_picks_whatever_the_queues(
    post_score, engines, redis_client
) -> None:
    request = request_tokens(8)
    hold(redis_client, PODS[0], request, ["GPU"] * 4)
    hold(redis_client, PODS[1], request, ["GPU"] * 4 + ["CPU"] * 2)
    heavy = request + request_tokens(1200, start=50_000)  # same hashed prefix, ~2 s of prefill
    _, loaded = post_score({"model": MODEL, "token_ids": heavy, "policy": "kthena"})
    assert loaded["chosen"] == PODS[1] and loaded["policy"] == "kthena"
    assert loaded["reason"] == f"highest kthena score ({loaded['scores'][0]['score']})"

    _, kthena = post_score({"model": MODEL, "token_ids": heavy, "policy": "kthena"})
    scores = {scored["pod"]: scored["score"] for scored in kthena["scores"]}
    assert kthena["chosen"] == choose(scores, PODS, kthena["first_block"])[0] == PODS[1]
    assert estimate(kthena, PODS[1])["wait_s"] > 1.0  # kthena's pick ignores it
    _, ttft = post_score({"model": MODEL, "token_ids": heavy})
    assert ttft["chosen"] != PODS[1] and ttft["scores"] == kthena["scores"]

    _, cold = post_score(
        {"model": MODEL, "token_ids": request_tokens(3, 90_000), "policy": "kthena"}
    )
    assert cold["chosen"] == tie_break(cold["first_block"], PODS) and cold["tie_break"]


def test_stale_and_absent_engine_load_is_flagged_and_fresh_load_resyncs_the_wait(
    post_score, engines, redis_client
) -> None:
    now = time.time()
    fresh = {"running": "3", "waiting": "50", "kv_usage": "0.9", "scraped_at": str(now)}
    redis_client.hset(load_key(PODS[0]), mapping=fresh)
    redis_client.hset(load_key(PODS[1]), mapping=fresh | {"scraped_at": str(now - 60)})
    request = request_tokens(8)
    hold(redis_client, PODS[0], request, ["GPU"] * 8)

    status, answer = post_score({"model": MODEL, "token_ids": request})
    assert status == 200
    assert answer["stale_loads"] == [PODS[1], PODS[2]]
    busy = estimate(answer, PODS[0])
    assert busy["load_stale"] is False and busy["engine_waiting"] == 50
    assert busy["queue_wait_s"] == 0.0
    cold_prefill = 0.015 + 128 / 10_000  # no routed prefill yet: this request's, uncached
    # What the engine waited at the scrape, less what it drained since.
    assert busy["wait_s"] == pytest.approx(50 * cold_prefill, abs=time.time() - now)
    assert answer["chosen"] != PODS[0]  # 50 queued requests outweigh 127 cached tokens
    for pod in PODS[1:]:
        assert estimate(answer, pod)["load_stale"] is True
        assert estimate(answer, pod)["engine_waiting"] is None


def test_an_unknown_policy_is_a_400_naming_the_field(post_score, engines) -> None:
    for policy in ("fastest", 3, ["ttft"], ""):
        status, answer = post_score(
            {"model": MODEL, "token_ids": request_tokens(1), "policy": policy}
        )
        assert status == 400 and answer["field"] == "policy", policy
        assert "ttft, kthena" in answer["error"]


def test_the_default_policy_is_the_knobs(post_score, engines, settings) -> None:
    assert post_score({"model": MODEL, "token_ids": request_tokens(1)})[1]["policy"] == "ttft"
    settings.KVADMIN = {"ROUTING_POLICY": "kthena"}
    assert post_score({"model": MODEL, "token_ids": request_tokens(1)})[1]["policy"] == "kthena"


def test_an_unrecorded_scoring_leaves_the_routing_state_alone(engines, redis_client) -> None:
    decision = service.score(MODEL, token_ids=request_tokens(4), record=False)
    assert decision.policy == "ttft" and decision.chosen in PODS
    assert redis_client.keys("kvadmin:queue:*") == []
    assert redis_client.keys("kvadmin:spec:*") == []


def test_recording_survives_a_script_flush_and_never_asks_script_exists(
    post_score, engines, redis_client, redis_url
) -> None:
    """A pipeline holding a redis-py Script would send SCRIPT EXISTS before every execute();
    the decision is recorded by a plain EVALSHA, and reloaded once after NOSCRIPT."""
    post_score({"model": MODEL, "token_ids": request_tokens(2)})
    redis_client.script_flush()
    watcher = redis.Redis.from_url(redis_url, decode_responses=True)
    with watcher.monitor() as monitor:
        answers = [post_score({"model": MODEL, "token_ids": request_tokens(2)}) for _ in range(2)]
        redis_client.echo("scored")
        sent = []
        while (command := monitor.next_command())["command"] != "ECHO scored":
            if command["client_type"] != "lua":
                sent.append(command["command"].upper())
    assert [status for status, _ in answers] == [200, 200]
    assert not [command for command in sent if command.startswith("SCRIPT EXISTS")]
    # Each of the decision's scripts is loaded once (a worker loop left by an earlier test may
    # load its own scripts on this server meanwhile: they are not counted).
    for script in (WALK, RECORD):
        loading = f"SCRIPT LOAD {script.text.splitlines()[0]}".upper()
        assert sum(command.startswith(loading) for command in sent) == 1, script.name
    logged = {decision.decision_id for decision in decisions.recent(10, client=redis_client)}
    assert {answer["decision_id"] for _, answer in answers} <= logged and len(logged) == 3


def test_manage_py_score_takes_the_policy(engines, redis_client, capsys) -> None:
    hold(redis_client, PODS[2], request_tokens(4), ["GPU"] * 4)
    call_command("score", "--model", MODEL, "--token-ids", "0,1,2", "--policy", "kthena")
    assert "policy kthena" in capsys.readouterr().out
    with pytest.raises(CommandError):
        call_command("score", "--model", MODEL, "--token-ids", "0,1", "--policy", "fast")


def test_the_feed_explains_each_candidates_estimate_and_why_the_winner_won(
    post_score, engines, redis_client, client, django_user_model
) -> None:
    now = time.time()
    redis_client.hset(
        load_key(PODS[2]),
        mapping={"running": "0", "waiting": "0", "kv_usage": "0.1", "scraped_at": str(now)},
    )
    hold(redis_client, PODS[1], request_tokens(8), ["GPU"] * 4 + ["CPU"] * 4)
    _, answer = post_score({"model": MODEL, "token_ids": request_tokens(8)})
    client.force_login(django_user_model.objects.create_user("bob", password="pw-bob-12345"))
    [decision] = decisions.recent(1, client=redis_client)

    html = client.get(f"/feed/decisions/{decision.log_id}/").content.decode()

    assert f"Policy <strong>ttft</strong>: {PODS[1]} because {answer['reason']}." in html
    chosen = html[html.index('<table class="estimates">') :].split("</tr>")[1]
    best = answer["estimates"][0]
    assert 'class="chosen load-stale"' in chosen and f"{best['cost_s'] * 1000:.1f}" in chosen
    assert f"{best['reload_s'] * 1000:.1f}" in chosen and best["reload_s"] > 0  # CPU hits
    assert "stale: virtual queue only" in chosen
    assert "engine: 0 waiting" in html
    assert f"(priced by kvadmin's own queue): {PODS[0]}, {PODS[1]}." in html
    assert "style=" not in html


def test_a_decision_keeps_the_cheapest_estimates_and_the_chosen_pods(
    post_score, engines, redis_client, settings
) -> None:
    """Under `kthena` the chosen pod may be the dearest: its estimate is kept all the same."""
    settings.KVADMIN = {"ROUTING_ESTIMATES_MAX": 1}
    request = request_tokens(8)
    hold(redis_client, PODS[2], request, ["GPU"] * 8)
    post_score(
        {"model": MODEL, "token_ids": request + request_tokens(1200, 70_000), "policy": "kthena"}
    )
    _, answer = post_score({"model": MODEL, "token_ids": request, "policy": "kthena"})
    assert answer["chosen"] == PODS[2]
    cheapest = answer["estimates"][0]["pod"]
    assert cheapest != PODS[2]
    assert [e["pod"] for e in answer["estimates"]] == [cheapest, PODS[2]]
