"""Probing every enabled engine for evidence that it is alive (`kvadmin.engines.evidence`),
in a worker: here, beside the ingest loop, which speaks the same replay protocol.

Two probes per engine, every run of the beat task `probe_engines` (every
KVADMIN_PROBE_PERIOD_SECONDS), all in parallel and each within KVADMIN_PROBE_TIMEOUT_SECONDS:

- each rank's replay socket is asked for the batches from seq 2**63-1 on: a live publisher
  answers the end marker alone at once (compatibility.md 4.1), a dead one never answers;
- the engine's HTTP `/health` (vLLM and SGLang serve it) must answer 200.

Results go to the engine's probe HASH (`keys.engine_probe_key`), written whole in one
transaction: `replay_at`, `replay_ok` ("1"/"0"), `replay_ms`, `replay_error`, and the same with
`http_`. Never in a request: a page only reads what the last probe found, and its age.
"""

import concurrent.futures as cf
import logging
import time
from dataclasses import dataclass
from functools import cache

import redis
import zmq
from celery import shared_task

from kvadmin.conf import knob
from kvadmin.ingest.replay import ReplayFailed, request_replay
from kvadmin.load.fetch import EngineFetch, FetchFailed
from kvadmin.loop_guard import LoopGuard, guarded_run
from scoring import keys

log = logging.getLogger(__name__)

PROBE_THREADS = 64
"""Probes run in parallel: 64 dead engines cost one timeout, not 64."""
PROBE_TTL_SECONDS = 86400
HEALTH_MAX_BYTES = 65_536
FAR_SEQ = 2**63 - 1
"""A seq no engine reaches: the replay answers nothing but its end marker."""
MAX_ERROR = 200


@dataclass(frozen=True, slots=True)
class ProbeTarget:
    pod: str
    replay_endpoints: tuple[str, ...]
    """One per data-parallel rank; empty without a replay endpoint."""
    http_base_url: str


@dataclass(frozen=True, slots=True)
class Result:
    ok: bool
    ms: float
    error: str = ""


def probe_targets() -> list[ProbeTarget]:
    from kvadmin.engines.models import Engine

    return [
        ProbeTarget(
            engine.pod,
            tuple(
                endpoint
                for rank in range(engine.dp_size)
                if (endpoint := engine.replay_endpoint_for(rank)) is not None
            ),
            engine.http_base_url,
        )
        for engine in Engine.objects.filter(enabled=True)
    ]


@cache
def _context() -> zmq.Context:
    return zmq.Context()


def _timed(probe, *args) -> Result:
    started = time.perf_counter()
    try:
        probe(*args)
    except Exception as error:  # whatever one probe meets, it is that probe's failure
        elapsed = (time.perf_counter() - started) * 1000
        expected = isinstance(error, ReplayFailed | FetchFailed | zmq.ZMQError | OSError)
        message = str(error) if expected else f"{type(error).__name__}: {error}"
        return Result(False, elapsed, message[:MAX_ERROR] or type(error).__name__)
    return Result(True, (time.perf_counter() - started) * 1000)


def _replay(endpoint: str, timeout: float) -> None:
    request_replay(_context(), endpoint, FAR_SEQ, timeout)


def _http(base_url: str, timeout: float) -> None:
    EngineFetch(base_url, timeout, HEALTH_MAX_BYTES, path="/health").run()


def probe_all(
    targets: list[ProbeTarget], timeout: float | None = None
) -> dict[str, dict[str, str]]:
    """Every target's probe fields (see the module), the probes run in parallel, each within
    `timeout` seconds (the PROBE_TIMEOUT_SECONDS knob by default)."""
    timeout = knob("PROBE_TIMEOUT_SECONDS") if timeout is None else timeout
    with cf.ThreadPoolExecutor(PROBE_THREADS, thread_name_prefix="kvadmin-probe") as pool:
        replays = {
            t.pod: [pool.submit(_timed, _replay, e, timeout) for e in t.replay_endpoints]
            for t in targets
        }
        https = {
            t.pod: pool.submit(_timed, _http, t.http_base_url, timeout)
            for t in targets
            if t.http_base_url
        }
        now = time.time()
        fields: dict[str, dict[str, str]] = {}
        for target in targets:
            record: dict[str, str] = {}
            if replays[target.pod]:
                results = [future.result() for future in replays[target.pod]]
                record |= _fields("replay", _worst(results), now)
            if target.pod in https:
                record |= _fields("http", https[target.pod].result(), now)
            fields[target.pod] = record
        return fields


def _worst(results: list[Result]) -> Result:
    """All ranks together: failed if any rank failed (naming the ranks), slowest time."""
    failed = [f"rank {rank}: {r.error}" for rank, r in enumerate(results) if not r.ok]
    slowest = max(r.ms for r in results)
    return Result(not failed, slowest, "; ".join(failed)[:MAX_ERROR])


def _fields(prefix: str, result: Result, now: float) -> dict[str, str]:
    return {
        f"{prefix}_at": f"{now:.3f}",
        f"{prefix}_ok": "1" if result.ok else "0",
        f"{prefix}_ms": f"{result.ms:.1f}",
        f"{prefix}_error": result.error,
    }


def record(client: redis.Redis, fields: dict[str, dict[str, str]]) -> None:
    """Each engine's probe HASH replaced whole, all in one transaction."""
    if not fields:
        return
    pipe = client.pipeline(transaction=True)
    for pod, record_fields in fields.items():
        key = keys.engine_probe_key(pod)
        pipe.delete(key)
        if record_fields:
            pipe.hset(key, mapping=record_fields)
            pipe.expire(key, PROBE_TTL_SECONDS)
    pipe.execute()


def probe_and_record(client: redis.Redis, timeout: float | None = None) -> int:
    """Probe every enabled engine and record what was found; returns how many engines."""
    fields = probe_all(probe_targets(), timeout)
    record(client, fields)
    return len(fields)


_guard = LoopGuard("probes", log)


@shared_task(name="kvadmin.ingest.probe_engines", ignore_result=True)
def probe_engines() -> int:
    """Celery beat, every PROBE_PERIOD_SECONDS (settings CELERY_IMPORTS names this module):
    probe each enabled engine, so pages and /readyz show evidence of life instead of socket
    state. A failed run is counted and logged once by its kind, and the runs within its
    backoff are skipped (`kvadmin.loop_guard`)."""
    from kvadmin.redis_clients import index_client

    return guarded_run(_guard, lambda: probe_and_record(index_client()), index_client(), 0)
