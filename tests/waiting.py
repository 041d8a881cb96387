"""Condition waits for tests: poll a predicate until it holds or a deadline passes.

A wait returns as soon as its condition holds, so a generous deadline costs a passing test
nothing: deadlines are what a loaded machine (the suite beside two CPU hogs) needs, not what a
quiet one takes. TEST_TIMEOUT_SCALE multiplies every deadline of the suite (wait_until's, the
browser's, a client's answer), the one setting for a machine slower still.
"""

import os
import time
from collections.abc import Callable

TIMEOUT_SCALE = float(os.environ.get("TEST_TIMEOUT_SCALE", "1"))
WAIT_SECONDS = 30.0
"""How long a wait gives its condition unless the test says otherwise."""
ANSWER_SECONDS = 2.0
"""The bound a test gives the product's own timeout where a healthy local server (a simulated
pod's /metrics) must answer within it: the product's 0.5 s scrape timeout leaves a machine
beside two CPU hogs little room. A server the test makes slow takes ten times as long."""


def patient(seconds: float) -> float:
    """A deadline of `seconds`, scaled for this machine (TEST_TIMEOUT_SCALE)."""
    return seconds * TIMEOUT_SCALE


def wait_until[T](
    predicate: Callable[[], T],
    timeout: float = WAIT_SECONDS,
    interval: float = 0.02,
    what: str = "",
) -> T:
    """Return the predicate's first truthy result; fail the test when `timeout` (scaled)
    passes first."""
    timeout = patient(timeout)
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(interval)


def a_second_after(moment: float) -> None:
    """Return once a second has passed since `moment` (a `time.monotonic()`, which every
    process of this machine shares). What a process does after that, however slow this machine
    is, must show a change made before `moment` that the product promises within a second."""
    wait_until(lambda: time.monotonic() >= moment + 1.0, what="a second to pass")
