"""An engine's state comes from evidence of life (probes, the scrape, events), each with its
age: a dead engine is unreachable, an unobserved one stale, a quiet one idle, never "ok"
because a socket says connected."""

from kvadmin.engines.evidence import EngineState, StreamFacts, Thresholds, engine_health

NOW = 1_000_000.0
LIMITS = Thresholds(stale_after=10.0, events_window=60.0, lag=5.0)


def probe(replay_ok: bool | None = True, http_ok: bool | None = True, age: float = 1.0) -> dict:
    fields = {}
    if replay_ok is not None:
        fields |= {
            "replay_at": str(NOW - age),
            "replay_ok": "1" if replay_ok else "0",
            "replay_ms": "0.4",
            "replay_error": "" if replay_ok else "rank 0: no end marker within 1s",
        }
    if http_ok is not None:
        fields |= {
            "http_at": str(NOW - age),
            "http_ok": "1" if http_ok else "0",
            "http_ms": "1.2",
            "http_error": "" if http_ok else "ConnectionRefusedError: refused",
        }
    return fields


def stream(event_age: float | None = 2.0, connected: bool = True, lag: float = 0.1) -> StreamFacts:
    status = {"connected": "1" if connected else "0", "batches": "7", "lag_seconds": str(lag)}
    if event_age is not None:
        status["last_event_at"] = str(int(NOW - event_age))
    return StreamFacts("rank 0", True, status)


def health(probe_fields: dict, streams: list[StreamFacts], enabled: bool = True, **scrape):
    return engine_health(
        "vllm-0.default",
        enabled=enabled,
        probe=probe_fields,
        streams=streams,
        scraped_at=scrape.get("scraped_at"),
        scrape_failed_at=scrape.get("failed_at"),
        scrape_failure=scrape.get("failure", ""),
        thresholds=LIMITS,
        now=NOW,
    )


def test_an_engine_answering_and_publishing_is_ok() -> None:
    found = health(probe(), [stream()])
    assert found.state is EngineState.OK
    assert {e.name: e.ok for e in found.evidence}["replay socket"] is True


def test_a_dead_publisher_is_unreachable_though_its_socket_says_connected() -> None:
    found = health(probe(replay_ok=False, http_ok=False), [stream(event_age=30, connected=True)])
    assert found.state is EngineState.UNREACHABLE
    assert "no end marker" in found.reason and "refused" in found.reason
    assert not found.healthy


def test_a_replay_socket_that_stopped_answering_is_enough_to_be_unreachable() -> None:
    assert health(probe(replay_ok=False), [stream()]).state is EngineState.UNREACHABLE


def test_no_evidence_younger_than_the_limit_is_stale() -> None:
    found = health(probe(age=11.0), [stream(event_age=20.0)])
    assert found.state is EngineState.STALE
    assert found.reason == "no evidence in the last 10 s"
    ages = {e.name: e.age(NOW) for e in found.evidence}
    assert ages["replay socket"] == 11.0 and ages["events"] == 20.0


def test_a_reachable_engine_without_recent_events_is_idle() -> None:
    assert health(probe(), [stream(event_age=120.0)]).state is EngineState.IDLE
    assert health(probe(), [stream(event_age=None)]).state is EngineState.IDLE


def test_a_stream_no_worker_reads_is_lagging() -> None:
    found = health(probe(), [stream(connected=False)])
    assert found.state is EngineState.LAGGING and "no worker reads it" in found.reason
    unleased = StreamFacts("rank 0", True, stream().status, leased=False)
    assert health(probe(), [unleased]).state is EngineState.LAGGING


def test_batches_applied_late_are_lagging() -> None:
    found = health(probe(), [stream(lag=30.0)])
    assert found.state is EngineState.LAGGING and "30.0 s late" in found.reason


def test_without_probes_the_scrape_decides() -> None:
    failed = health({}, [stream(event_age=None)], scraped_at=NOW - 30, failed_at=NOW - 1)
    assert failed.state is EngineState.UNREACHABLE
    scraped = health({}, [stream(event_age=None)], scraped_at=NOW - 1)
    assert scraped.state is EngineState.IDLE


def test_a_disabled_engine_is_disabled_whatever_the_evidence() -> None:
    assert health(probe(), [stream()], enabled=False).state is EngineState.DISABLED


def test_the_evidence_reports_its_age_for_readyz() -> None:
    described = health(probe(age=3.0), [stream()]).as_dict()
    assert described["state"] == "ok"
    replay = next(e for e in described["evidence"] if e["name"] == "replay socket")
    assert replay == {
        "name": "replay socket",
        "ok": True,
        "age_seconds": 3.0,
        "detail": "answered in 0.4 ms",
    }
