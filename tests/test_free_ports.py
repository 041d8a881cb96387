"""The test helpers' free ports: a port the kernel released is handed out again, so picks that
are free "a moment ago" could collide within one test (a pod's events and replay ports)."""

from kvadmin.redis_server import free_port


def test_no_port_is_handed_out_twice() -> None:
    # By the birthday bound, 1,000 plain picks from Linux's ~28,000 ephemeral ports repeat one
    # with near certainty.
    picked = [free_port() for _ in range(1000)]
    assert len(set(picked)) == len(picked)
