"""Condition waits for tests: poll a predicate until it holds or a deadline passes."""

import time
from collections.abc import Callable


def wait_until[T](
    predicate: Callable[[], T], timeout: float = 10.0, interval: float = 0.02, what: str = ""
) -> T:
    """Return the predicate's first truthy result; fail the test when `timeout` passes first."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(interval)
