"""Continuous calibration of the `ttft` policy's parameters (issue 33 item 1), on by default.

A beat task (every CALIBRATION_PERIOD_SECONDS) fits the parameters per pod and per model from
the engines' prefill counters and the delivered outcomes (kvadmin.weights.evidence, kvadmin.
weights.fit: robust lines, implausible windows refused, lower-tier hits apart, one vote per
engine and per requester), takes one guarded step towards the fit (kvadmin.weights.
calibration_step) and, when something moved, appends it as a version whose author is
"calibration" and whose reason lists what moved and the fit's confidence. A version is a
version: the history shows it, the review diffs it, a restore undoes it, and the weights'
publication (kvadmin.weights.active) reaches every process within WEIGHTS_REFRESH_SECONDS.

An operator pins the parameters by saving them with calibration "manual": the task then leaves
them alone until a version says "auto" again. A save by an operator between the task's read
and its write wins (the task's save is refused as stale, and the next run starts from it).
"""

import logging

import redis
from celery import shared_task
from django.db import DatabaseError

from kvadmin.conf import knob
from kvadmin.metrics import families, recorder
from kvadmin.redis_clients import index_client
from kvadmin.weights.calibration_step import step
from kvadmin.weights.evidence import evidence_fit
from kvadmin.weights.versions import NothingChanged, StaleDraft, current_version, save_version

log = logging.getLogger(__name__)

AUTHOR = "calibration"


@shared_task(name="kvadmin.weights.calibrate")
def calibrate() -> dict[str, object]:
    """One calibration run; what it did, for the log, the tests and /metrics."""
    try:
        result = _run()
    except (redis.RedisError, DatabaseError) as error:
        log.warning("calibration: %s", error)
        result = {"result": "error", "error": str(error)[:200]}
    try:
        pipe = index_client().pipeline(transaction=False)
        recorder.inc(pipe, families.CALIBRATION_RUNS, (str(result["result"]),))
        pipe.execute()
    except redis.RedisError:
        pass  # the run itself is recorded (or not) in the versions; the counter can miss one
    return result


def _run() -> dict[str, object]:
    if not knob("CALIBRATION"):
        return {"result": "off"}
    current = current_version()
    config = current.weight_config
    if config.ttft.calibration == "manual":
        return {"result": "manual", "version": current.version}
    fitted = evidence_fit(index_client(), config)
    moved = step(config.ttft, fitted)
    if moved is None:
        return {"result": "unchanged", "version": current.version, "refused": fitted.refused}
    reason = "; ".join(moved.changes)
    if len(reason) > 480:
        reason = reason[:477] + "..."
    try:
        saved = save_version(
            config.with_ttft(moved.parameters),
            author=AUTHOR,
            base_version=current.version,
            reason=f"calibration: {reason}",
        )
    except StaleDraft:
        return {"result": "stale", "version": current.version}
    except NothingChanged:
        return {"result": "unchanged", "version": current.version}
    log.info("calibration: version %s: %s", saved.version, reason)
    return {
        "result": "changed",
        "version": saved.version,
        "changes": list(moved.changes),
        "confidence": moved.confidence,
    }
