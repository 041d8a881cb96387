"""The picker's own counters, in its process's Prometheus registry (served on its metrics
port): what it answered, why a choice was degraded, what became of each response's outcome.
In memory, not in Redis: they must count while Redis is out."""

from prometheus_client import CollectorRegistry, Counter, Histogram

registry = CollectorRegistry()

answers = Counter(
    "kvadmin_picker_requests",
    "Requests the picker answered: routed (a decision), degraded (a cheap fallback "
    "choice), refused (an immediate answer) or passed (not an inference request).",
    ["answer"],
    registry=registry,
)
degraded = Counter(
    "kvadmin_picker_degraded",
    "Degraded choices by reason: deadline (no decision within "
    "KVADMIN_PICKER_DECISION_DEADLINE_SECONDS, or of the request's budget), behind (the "
    "body came after KVADMIN_PICKER_REQUEST_BUDGET_SECONDS of the request had passed: "
    "nothing started), redis (an outage), busy "
    "(KVADMIN_PICKER_MAX_DECISIONS_IN_FLIGHT decisions in flight already, late ones "
    "included: not started), tokenize.",
    ["reason"],
    registry=registry,
)
late_decisions = Counter(
    "kvadmin_picker_late_decisions",
    "Decisions ended after their deadline had answered with a degraded choice: not "
    "cancelled (a Redis command cancelled in flight drops its connection) but stopped at "
    "their next expensive step (kvadmin_picker_late_steps_skipped), or finished, then "
    "dropped, nothing recorded.",
    registry=registry,
)
late_steps_skipped = Counter(
    "kvadmin_picker_late_steps_skipped",
    "Decisions past their deadline stopped before an expensive step, by step: tokenize "
    "(the text's tokenizing in a worker thread), redis (the index script call).",
    ["step"],
    registry=registry,
)
refused = Counter(
    "kvadmin_picker_refused",
    "Requests answered at once by the picker, by HTTP status.",
    ["status"],
    registry=registry,
)
outcomes = Counter(
    "kvadmin_picker_outcomes",
    "Responses to routed requests: recorded (an outcome), unfinished (the picker never saw "
    "the end: client abort, upstream reset), no_usage, not_ok (an error status), repeated, "
    "unknown (the decision left the log), failed (Redis refused the recording).",
    ["result"],
    registry=registry,
)
decision_seconds = Histogram(
    "kvadmin_picker_decision_seconds",
    "Time from the request body to the picker's answer.",
    buckets=(0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0),
    registry=registry,
)
