"""Calibration folds delivered outcomes as they arrive (issue 33 item 1): each run reads only
what the outcome log gained since its cursor, the folded window outlives the decision log and
a worker's restart, two calibrators never fold an outcome twice, a log trimmed past the cursor
is counted and folded on from what is left, and no requester grows the window past its bounds.
Outcomes go through the real log and recording script in a real Redis."""

import threading

import pytest
from django.test import override_settings

from kvadmin.weights import evidence_window
from kvadmin.weights.evidence import followed_fit, outcome_window
from kvadmin.weights.evidence_window import MAX_REQUESTERS, Evidence, Followed, follow
from kvadmin.weights.fit import MAX_POINTS
from scoring import keys
from tests.weights.test_calibration_outcomes import SPEED, T0, engine, pod_line, report

SERVED = {("vllm-0", "m")}


def forget_the_process_copy() -> None:
    """What a worker's restart does to the folded window: only Redis has it."""
    evidence_window._cached = Evidence()


def follow_now(client) -> Followed:
    """One calibration run's fold, for the one engine "vllm-0" of model "m"."""
    return follow(client, SERVED, outcome_window)


def kept(client, requester: str = "gateway") -> int:
    return len(follow_now(client).reported.get("vllm-0", {}).get(requester, []))


@pytest.mark.django_db
def test_a_run_folds_only_what_arrived_since_the_last(version_one, redis_client) -> None:
    engine("vllm-0")
    report(redis_client, "vllm-0", 30)
    assert followed_fit(redis_client, version_one.weight_config)[1].folded == 30
    report(redis_client, "vllm-0", 5)
    fitted, followed = followed_fit(redis_client, version_one.weight_config)
    assert followed.folded == 5
    assert pod_line(fitted, "vllm-0").windows == 35
    assert followed_fit(redis_client, version_one.weight_config)[1].folded == 0


@pytest.mark.django_db
def test_the_window_outlives_the_decision_log_and_a_restart(version_one, redis_client) -> None:
    """The decision log moved on (and the outcomes went with it) and the worker restarted:
    the folded outcomes are still evidence, counted once."""
    engine("vllm-0")
    report(redis_client, "vllm-0", 30)
    before = pod_line(followed_fit(redis_client, version_one.weight_config)[0], "vllm-0")
    redis_client.delete(keys.DECISIONS_KEY, keys.OUTCOMES_KEY, keys.DECISION_IDS_KEY)
    forget_the_process_copy()
    fitted, followed = followed_fit(redis_client, version_one.weight_config)
    assert followed.folded == 0
    assert pod_line(fitted, "vllm-0") == before
    assert before.windows == 30 and before.tokens_per_s == pytest.approx(SPEED, rel=0.03)


@pytest.mark.django_db
def test_two_calibrators_never_fold_an_outcome_twice(redis_client) -> None:
    """Two processes' calibrators follow the log at once while outcomes arrive: every outcome
    is folded by exactly one of them."""
    folded: list[int] = []
    stop = threading.Event()

    def calibrator() -> None:
        while not stop.is_set():
            folded.append(follow_now(redis_client).folded)

    threads = [threading.Thread(target=calibrator) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        for requester in ("a", "b", "c"):
            report(redis_client, "vllm-0", 40, requester=requester)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    folded.append(follow_now(redis_client).folded)
    assert sum(folded) == 120
    assert [kept(redis_client, who) for who in ("a", "b", "c")] == [40, 40, 40]


@pytest.mark.django_db
def test_a_log_trimmed_past_the_cursor_is_counted_and_folded_from_what_is_left(
    redis_client,
) -> None:
    report(redis_client, "vllm-0", 20)
    assert follow_now(redis_client).folded == 20
    report(redis_client, "vllm-0", 50)
    redis_client.xtrim(keys.OUTCOME_LOG_KEY, maxlen=10, approximate=False)
    followed = follow_now(redis_client)
    assert (followed.lost, followed.folded) == (40, 10)
    assert len(followed.reported["vllm-0"]["gateway"]) == 30
    assert redis_client.hget(keys.CALIBRATION_EVIDENCE_KEY, "lost") == "40"
    report(redis_client, "vllm-0", 3)
    assert (follow_now(redis_client).lost, kept(redis_client)) == (0, 33), (
        "and it goes on from there"
    )


@pytest.mark.django_db
def test_a_new_log_after_the_cursor_is_read_from_its_start(redis_client) -> None:
    """Redis lost the log (a flush, a failover without it) but kept the window."""
    report(redis_client, "vllm-0", 20)
    follow_now(redis_client)
    redis_client.delete(keys.OUTCOME_LOG_KEY)
    report(redis_client, "vllm-0", 7)
    followed = follow_now(redis_client)
    assert (followed.lost, followed.folded, kept(redis_client)) == (0, 7, 27)


@override_settings(KVADMIN={"CALIBRATION_OUTCOMES": 25})
@pytest.mark.django_db
def test_a_run_reads_a_bounded_number_and_the_next_goes_on(redis_client) -> None:
    report(redis_client, "vllm-0", 60)
    assert [follow_now(redis_client).folded for _ in range(4)] == [25, 25, 10, 0]
    assert kept(redis_client) == 60


@pytest.mark.django_db
def test_no_requester_grows_the_window_past_its_bounds(redis_client) -> None:
    """A flood keeps a line's newest MAX_POINTS windows (all a line reads); a crowd of
    requesters keeps MAX_REQUESTERS lines per pod, those that reported last; pods that are no
    engine of the model keep nothing."""
    report(redis_client, "vllm-0", MAX_POINTS + 40, requester="flooder")
    for n in range(MAX_REQUESTERS + 4):
        report(redis_client, "vllm-0", 3, requester=f"crowd-{n}")
    report(redis_client, "vllm-9", 10, requester="elsewhere")
    report(redis_client, "vllm-0", 10, model="other")
    followed = follow_now(redis_client)
    lines = followed.reported["vllm-0"]
    assert len(lines) == MAX_REQUESTERS and "flooder" not in lines
    assert set(followed.reported) == {"vllm-0"}
    fields = redis_client.hkeys(keys.CALIBRATION_EVIDENCE_KEY)
    assert len([name for name in fields if name.startswith("w:")]) == 1


@pytest.mark.django_db
def test_a_flood_keeps_only_its_newest_windows(redis_client) -> None:
    report(redis_client, "vllm-0", MAX_POINTS + 40, requester="flooder", t0=T0 * 3)
    report(redis_client, "vllm-0", 12)
    followed = follow_now(redis_client)
    assert len(followed.reported["vllm-0"]["flooder"]) == MAX_POINTS
    assert len(followed.reported["vllm-0"]["gateway"]) == 12
