"""`manage.py tier_weights` shows and changes the weights with the page's rules: a bad entry
is named, nothing is saved, and the exit status is non-zero."""

import subprocess
import sys
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from kvadmin.weights.models import TierWeightsVersion
from kvadmin.weights.versions import current_version
from scoring.keys import WEIGHTS_VERSION_KEY
from scoring.weights import KVADMIN_WEIGHTS
from tests.conftest import ROOT
from tests.index import MODEL
from tests.waiting import patient

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command("tier_weights", *args, stdout=out)
    return out.getvalue()


def current() -> str:
    """The version a script read (`tier_weights show`) before its change."""
    return str(current_version().version)


def refused(*args: str) -> str:
    versions = TierWeightsVersion.objects.count()
    with pytest.raises(CommandError) as raised:
        run(*args)
    assert TierWeightsVersion.objects.count() == versions, "a refused change saved a version"
    return str(raised.value)


def from_the_shell(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`manage.py tier_weights ARGS` in a process of its own, as an operator's shell runs it."""
    return subprocess.run(
        [sys.executable, "manage.py", "tier_weights", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=patient(60),
    )  # fmt: skip


def test_set_merges_over_the_current_weights(fresh_weights) -> None:
    assert (
        run("set", "--base-version", current(), "gpu=1", "cpu=0.7", "--reason", "nightly tune")
        == "saved version 2\n"
    )
    saved = TierWeightsVersion.objects.get(version=2)
    assert saved.config["weights"] == {**KVADMIN_WEIGHTS, "cpu": 0.7}
    assert saved.reason == "nightly tune"
    assert saved.author.endswith("(cli)")


def test_set_matches_names_ignoring_case(fresh_weights) -> None:
    run(
        "set",
        "--base-version",
        current(),
        "CPU=0.6",
        "Disk=0.2",
        "--fallback",
        "0.9",
        "--reason",
        "t",
    )
    saved = TierWeightsVersion.objects.get(version=2)
    assert saved.config["weights"] == {**KVADMIN_WEIGHTS, "cpu": 0.6, "disk": 0.2}
    assert saved.config["fallback"] == 0.9


def test_set_names_every_bad_entry(fresh_weights) -> None:
    message = refused(
        "set", "--base-version", current(), "gpu=1.5", "cpu=nan", "=0.5", "disk", "--reason", "t"
    )
    assert "'gpu': must be between 0 and 1, got 1.5" in message
    assert "'cpu': must be a number between 0 and 1, got NaN" in message
    assert "'': the name is empty" in message
    assert "'disk': expected MEDIUM=WEIGHT" in message


def test_set_refuses_the_same_medium_twice_in_different_case(fresh_weights) -> None:
    message = refused("set", "--base-version", current(), "disk=0.5", "DISK=0.4", "--reason", "t")
    assert "'disk': the same medium as 'DISK'" in message


def test_set_refuses_a_bad_fallback(fresh_weights) -> None:
    assert "fallback: must be between 0 and 1, got -0.1" in refused(
        "set", "--base-version", current(), "--fallback=-0.1", "--reason", "t"
    )


def test_set_can_remove_a_medium(fresh_weights) -> None:
    run("set", "--base-version", current(), "--remove", "CPU_PINNED", "--reason", "t")
    weights = dict(KVADMIN_WEIGHTS)
    del weights["cpu_pinned"]
    assert TierWeightsVersion.objects.get(version=2).config["weights"] == weights
    assert "'nvme': not configured" in refused(
        "set", "--base-version", current(), "--remove", "nvme", "--reason", "t"
    )


def test_setting_the_same_weights_saves_nothing(fresh_weights) -> None:
    assert "version 1 already has these weights" in refused(
        "set", "--base-version", current(), "gpu=1", "--reason", "t"
    )


def test_show_lists_the_effective_weights(fresh_weights) -> None:
    run("set", "--base-version", current(), "disk=0.25", "--reason", "t")
    out = run("show")
    assert "version 2" in out
    assert "disk             0.25   configured" in out
    assert "(fallback)       1      every other medium" in out


def test_history_and_restore(fresh_weights) -> None:
    run("set", "--base-version", current(), "gpu=0.5", "--reason", "experiment")
    assert "--reason" in refused("restore", "1", "--base-version", "2")
    assert run("restore", "1", "--base-version", "2", "--reason", "undo") == (
        "restored version 1 as version 3\n"
    )
    assert "version 3 was saved by" in refused(
        "restore", "2", "--base-version", "2", "--reason", "stale"
    )
    history = run("history")
    assert "gpu 1 → 0.5" in history and "gpu 0.5 → 1" in history
    with pytest.raises(CommandError, match="there is no version 9"):
        run("restore", "9", "--base-version", "3", "--reason", "x")


# The shell's process writes (or takes the write lock) beside this one's: a transactional test
# holds no transaction open meanwhile.
@pytest.mark.django_db(transaction=True)
def test_a_refusal_exits_non_zero_from_the_shell(subprocess_env) -> None:
    result = from_the_shell(
        subprocess_env, "set", "--base-version", "1", "gpu=1.5", "fs=-1", "--reason", "t"
    )
    assert result.returncode == 1
    assert "'gpu': must be between 0 and 1, got 1.5" in result.stderr
    assert "'fs': must be between 0 and 1, got -1.0" in result.stderr


def test_publish_repairs_an_announcement_redis_lost(fresh_weights, redis_client) -> None:
    assert run("publish") == "published version 1\n"
    assert redis_client.get(WEIGHTS_VERSION_KEY) == "1"
    redis_client.set(
        WEIGHTS_VERSION_KEY, 7
    )  # e.g. Redis kept a number from before a database restore
    assert run("publish") == "Redis already names version 1 or a newer one\n"
    assert run("publish", "--force") == "published version 1\n"
    assert redis_client.get(WEIGHTS_VERSION_KEY) == "1"


def test_set_needs_the_version_it_was_made_from(fresh_weights) -> None:
    assert "--base-version" in refused("set", "gpu=0.9", "--reason", "t")


def test_set_needs_a_reason(fresh_weights) -> None:
    assert "--reason" in refused("set", "--base-version", current(), "gpu=0.9")
    assert "give a reason" in refused(
        "set", "--base-version", current(), "gpu=0.9", "--reason", " "
    )


def test_a_stale_base_version_saves_nothing_and_tells_what_changed(fresh_weights) -> None:
    run("set", "--base-version", "1", "cpu=0.5", "--reason", "CPU is slow", "--author", "bob")

    message = refused("set", "--base-version", "1", "gpu=0.9", "--reason", "t")

    assert "version 2 was saved by bob after you loaded version 1" in message
    assert "version 2 · " in message and " UTC · bob · “CPU is slow”: cpu 0.8 → 0.5" in message


@pytest.mark.django_db(transaction=True)
def test_a_stale_base_version_exits_non_zero_from_the_shell(subprocess_env, version_one) -> None:
    result = from_the_shell(
        subprocess_env, "set", "--base-version", "0", "gpu=0.9", "--reason", "t"
    )
    assert result.returncode == 1
    assert "after you loaded version 0" in result.stderr


def test_set_changes_ttft_parameters_with_the_pages_rules(fresh_weights) -> None:
    out = run(
        "set", "--base-version", current(), "--param", "kappa=2", "--param", "first_token_s=0.03",
        "--speed", f"{MODEL}=12000", "--reason", "measured",
    )  # fmt: skip
    assert out == "saved version 2\n"
    ttft = TierWeightsVersion.objects.get(version=2).weight_config.ttft
    assert (ttft.kappa, ttft.first_token_s) == (2.0, 0.03)
    assert ttft.prefill_tokens_per_s == ((MODEL, 12000.0),)
    shown = run("show")
    assert "kappa                          2" in shown
    assert f"prefill_tokens_per_s           12000      {MODEL}" in shown
    assert "not in the kthena export" in shown
    history = run("history")
    assert "kappa (work penalty) 1.5 → 2" in history
    assert f"added prefill tokens/s of {MODEL} = 12000" in history

    run("set", "--base-version", current(), "--speed", f"{MODEL}=", "--reason", "drop it")
    assert TierWeightsVersion.objects.get(version=3).weight_config.ttft.prefill_tokens_per_s == ()


def test_set_names_every_bad_parameter(fresh_weights) -> None:
    message = refused(
        "set", "--base-version", current(), "--param", "kappa=-1", "--param", "t0=1",
        "--param", "decode_slowdown=fast", "--speed", "m=0", "--reason", "t",
    )  # fmt: skip
    assert "kappa: must be at least 0 and at most 100, got -1.0" in message
    assert "--param 't0=1': expected NAME=VALUE, NAME one of first_token_s" in message
    assert "decode_slowdown: must be a number, got 'fast'" in message
    assert "speed of 'm': must be above 0 and at most 1e+08, got 0.0" in message


def test_fit_says_what_it_could_not_fit_and_saves_nothing(fresh_weights) -> None:
    from kvadmin.engines.models import Engine

    Engine.objects.create(
        pod="vllm-0.default", model="m", kind="vllm", events_endpoint="tcp://127.0.0.1:1"
    )
    out = run("fit")
    assert "T0 not fitted" in out and "skipped vllm-0.default: fewer than two samples" in out
    assert TierWeightsVersion.objects.count() == 1
