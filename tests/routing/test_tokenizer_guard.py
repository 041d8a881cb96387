"""The consistency guard samples locally tokenized requests, compares them with an engine's
/tokenize off the request path, and stops using a model's local tokenizer once too many
differ: for every process (the state is in Redis), visibly (pod page, /metrics)."""

from collections.abc import Iterator

import pytest
from django.test import override_settings
from prometheus_client import generate_latest

from kvadmin.api.operations import build_registry
from kvadmin.engines.models import Engine
from kvadmin.metrics import families
from kvadmin.metrics.families import label_field
from kvadmin.routing import tokenizer_guard
from tests.conftest import local_config
from tests.index import MODEL
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db
EVERY_REQUEST = override_settings(
    KVADMIN={
        "TOKENIZER_CHECK_EVERY": 1,
        "TOKENIZER_CHECK_MIN": 3,
        "TOKENIZER_MISMATCH_MAX": 0.5,
        "TOKENIZER_GUARD_REFRESH_SECONDS": 0.0,
    }
)


@pytest.fixture(autouse=True)
def _rearmed(redis_client) -> Iterator[None]:
    """No other test sees this one's verdicts (the process caches them)."""
    yield
    tokenizer_guard.reset(MODEL, redis_client)


@pytest.fixture
def browsing(client, django_user_model):
    """Alice looks at the pod pages."""
    client.force_login(django_user_model.objects.create_user("alice", password="pw-alice-1"))
    return client


def _serve(start_fleet, tokenizer: str, engine_tokenizer: str) -> str:
    """One pod tokenizing with `engine_tokenizer` (empty: the toy one), registered with
    `tokenizer` as the model's local tokenizer; returns its pod id."""
    return _serve_all(start_fleet, tokenizer, [engine_tokenizer])[0]


def _serve_all(start_fleet, local: str, engine_tokenizers: list[str]) -> list[str]:
    """A pod of the model per entry of `engine_tokenizers`, tokenizing with it ("": the toy
    one), with `local` as the model's local tokenizer; their pod ids."""
    configs = [
        local_config(f"vllm-{n}.default", model=MODEL, tokenizer=tokenizer)
        for n, tokenizer in enumerate(engine_tokenizers)
    ]
    fleet = start_fleet(*configs)
    for pod in fleet.pods:
        Engine.objects.create(
            pod=pod.name,
            model=MODEL,
            kind="vllm",
            events_endpoint="tcp://127.0.0.1:5557",
            http_base_url=pod.config.http_url,
            tokenizer=local,
        )
    return [pod.name for pod in fleet.pods]


@EVERY_REQUEST
def test_a_tokenizer_unlike_the_engines_is_disabled_after_enough_mismatches(
    start_fleet, post_score, redis_client, deepseek_v4, browsing
) -> None:
    pod = _serve(start_fleet, tokenizer=deepseek_v4, engine_tokenizer="")  # the engine: toy
    for n in range(3):
        status, answer = post_score({"model": MODEL, "prompt": f"The cache holds prefix {n}."})
        assert status == 200 and answer["tokenizer"] == "local"

    wait_until(
        lambda: tokenizer_guard.state(MODEL, redis_client).disabled_at is not None,
        what="the guard to disable the local tokenizer",
    )
    state = tokenizer_guard.state(MODEL, redis_client)
    assert (state.checks, state.mismatches) == (3, 3)
    status, answer = post_score({"model": MODEL, "prompt": "The cache holds prefix 9."})
    assert status == 200 and answer["tokenizer"] == f"engine:{pod}"
    exposition = generate_latest(build_registry(redis_client)).decode()
    assert f'kvadmin_local_tokenizer_disabled{{model="{MODEL}"}} 1.0' in exposition
    assert (
        f'kvadmin_local_tokenizer_checks_total{{model="{MODEL}",result="mismatch"}} 3.0'
        in exposition
    )
    assert (
        f'kvadmin_local_tokenizer_fallbacks_total{{model="{MODEL}",reason="disabled"}} 1.0'
        in exposition
    )
    page = browsing.get(f"/pods/{pod}/").content.decode()
    assert "disabled" in page and "3 mismatched" in page


@EVERY_REQUEST
def test_the_same_tokenizer_on_both_sides_stays_in_use(
    start_fleet, post_score, redis_client, deepseek_v4, browsing
) -> None:
    pod = _serve(start_fleet, tokenizer=deepseek_v4, engine_tokenizer=deepseek_v4)
    chat = [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Hi"}]
    for n in range(4):
        post_score({"model": MODEL, "prompt": f"A real prompt, number {n}."})
        post_score({"model": MODEL, "messages": [*chat, {"role": "user", "content": str(n)}]})

    wait_until(
        lambda: tokenizer_guard.state(MODEL, redis_client).checks == 8,
        what="eight checks",
    )
    assert tokenizer_guard.state(MODEL, redis_client).mismatches == 0
    assert not tokenizer_guard.disabled(MODEL)
    page = browsing.get(f"/pods/{pod}/").content.decode()
    assert "in use" in page and "8: 8 matched" in page


@EVERY_REQUEST
def test_saving_an_engine_of_the_model_rearms_its_tokenizer(
    redis_client, deepseek_v4, django_capture_on_commit_callbacks
) -> None:
    for _ in range(3):
        tokenizer_guard.record(MODEL, matched=False, client=redis_client)
    assert tokenizer_guard.disabled(MODEL)

    with django_capture_on_commit_callbacks(execute=True):
        Engine.objects.create(
            pod="vllm-0.default",
            model=MODEL,
            events_endpoint="tcp://127.0.0.1:5557",
            tokenizer=deepseek_v4,
        )

    assert tokenizer_guard.state(MODEL, redis_client) == tokenizer_guard.GuardState()
    assert not tokenizer_guard.disabled(MODEL)


def test_a_check_no_engine_answers_is_skipped_not_a_mismatch(redis_client) -> None:
    def unanswered(left_out: set[str]) -> tuple[str, list[int]]:
        raise ConnectionRefusedError("no engine")

    check = tokenizer_guard.Check(MODEL, [1, 2], 2, False, unanswered)
    assert tokenizer_guard.run_check(check, redis_client) is None
    assert tokenizer_guard.state(MODEL, redis_client).checks == 0
    field = label_field((MODEL, "skipped"))
    assert redis_client.hget(families.TOKENIZER_CHECKS.key, field) == "1"


@EVERY_REQUEST
def test_one_dissenting_engine_of_three_is_reported_and_left_out_not_obeyed(
    start_fleet, post_score, redis_client, deepseek_v4, browsing
) -> None:
    agreeing, other, dissenter = _serve_all(start_fleet, deepseek_v4, [deepseek_v4] * 2 + [""])
    for n in range(12):
        status, answer = post_score({"model": MODEL, "prompt": f"The cache holds prefix {n}."})
        assert status == 200 and answer["tokenizer"] == "local", answer

    wait_until(
        lambda: tokenizer_guard.state(MODEL, redis_client).checks == 12,
        timeout=20,
        what="twelve checks",
    )
    state = tokenizer_guard.state(MODEL, redis_client)
    assert state.mismatches == 0 and state.disabled_at is None
    assert not tokenizer_guard.disabled(MODEL)
    assert tokenizer_guard.dissenting(MODEL, redis_client) == {dissenter}
    dissent = tokenizer_guard.engine_state(MODEL, dissenter, redis_client)
    # Once dissenting, it is asked no more.
    assert dissent.dissents == dissent.mismatches == dissent.checks == tokenizer_guard.DISSENTS_MIN
    for pod in (agreeing, other):
        engine = tokenizer_guard.engine_state(MODEL, pod, redis_client)
        assert engine.mismatches == 0 and engine.checks > 0

    exposition = generate_latest(build_registry(redis_client)).decode()
    labels = f'model="{MODEL}",pod="{dissenter}"'
    assert f"kvadmin_local_tokenizer_engine_dissenting{{{labels}}} 1.0" in exposition
    assert f'kvadmin_local_tokenizer_engine_dissenting{{model="{MODEL}",pod="{agreeing}"}} 0.0' in (
        exposition
    )
    assert f'kvadmin_local_tokenizer_engine_checks{{{labels},result="dissent"}} 2.0' in exposition
    assert f'kvadmin_local_tokenizer_disabled{{model="{MODEL}"}} 0.0' in exposition
    page = browsing.get(f"/pods/{dissenter}/").content.decode()
    assert "dissenting" in page and "left out of the checks" in page
    assert "left out of the checks" not in browsing.get(f"/pods/{agreeing}/").content.decode()

    with override_settings(KVADMIN={"TOKENIZER_GUARD_REFRESH_SECONDS": 0.0}):
        tokenizer_guard.reset(MODEL, redis_client)
    assert tokenizer_guard.engine_states(redis_client) == {}


@EVERY_REQUEST
def test_engines_that_agree_with_one_another_disable_the_tokenizer(
    start_fleet, post_score, redis_client, deepseek_v4
) -> None:
    _serve_all(start_fleet, deepseek_v4, ["", "", deepseek_v4])
    for n in range(9):
        post_score({"model": MODEL, "prompt": f"The cache holds prefix {n}."})
        if tokenizer_guard.disabled(MODEL):
            break
    wait_until(
        lambda: tokenizer_guard.state(MODEL, redis_client).disabled_at is not None,
        timeout=20,
        what="the guard to disable the local tokenizer",
    )
    assert tokenizer_guard.dissenting(MODEL, redis_client) == set()
