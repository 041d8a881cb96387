"""A stream's health on the dashboard: disconnected, degraded, lagging or ok, from its status
counters, its lease and what changed recently."""

from kvadmin.index.streams import StreamId
from kvadmin.metrics.fleet import Health, StreamState

NOW = 1_800_000_000.0
LAG = 5.0


def stream(owner: str | None = "worker-a", lag: float | None = 0.1, applied: float = NOW, **status):
    applied_fields = {"last_event_at": str(applied)} | (
        {} if lag is None else {"lag_seconds": str(lag)}
    )
    return StreamState(
        id=StreamId("vllm-0.default", 0),
        status={"connected": "1", **applied_fields, **status},
        owner=owner,
        consumed=True,
    )


def test_a_connected_leased_stream_is_ok() -> None:
    assert stream().health(0, LAG, NOW) is Health.OK


def test_without_a_live_lease_holder_it_is_disconnected() -> None:
    assert stream(owner=None).health(0, LAG, NOW) is Health.DISCONNECTED
    assert stream(connected="0").health(0, LAG, NOW) is Health.DISCONNECTED


def test_recent_faults_degrade_it_and_old_ones_do_not() -> None:
    old_faults = stream(batches_lost="7")

    assert old_faults.health(recent_faults=0, lag_threshold=LAG, now=NOW) is Health.OK
    assert old_faults.health(recent_faults=2, lag_threshold=LAG, now=NOW) is Health.DEGRADED
    assert old_faults.faults == 7


def test_gaps_repaired_by_replay_are_not_faults() -> None:
    assert stream(gaps="40", replays="40", restarts="2").faults == 0


def test_a_late_batch_applied_recently_means_lagging() -> None:
    assert stream(lag=30.0, applied=NOW - 2).health(0, LAG, NOW) is Health.LAGGING


def test_an_idle_stream_is_not_lagging_forever() -> None:
    """Its last batch came late, but nothing has been waiting since."""
    assert stream(lag=30.0, applied=NOW - 600).health(0, LAG, NOW) is Health.OK
