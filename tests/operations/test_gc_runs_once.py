"""Two workers handed the garbage-collection task at once run it once: whether a run is due is
decided once the run's lock is held, so the second one sees the first one's run."""

from kvadmin.index import gc
from kvadmin.index.writer import Applier

MAX_AGE = 86400


def test_a_run_is_due_only_if_none_started_within_the_interval(redis_client) -> None:
    assert (
        gc.collect_garbage(Applier(redis_client), MAX_AGE, registered=set, interval=600) is not None
    )
    # The other worker checked the same moment and got the lock only now:
    assert gc.collect_garbage(Applier(redis_client), MAX_AGE, registered=set, interval=600) is None
    assert gc.totals(redis_client)["runs"] == 1


def test_a_forced_run_needs_no_interval(redis_client) -> None:
    gc.collect_garbage(Applier(redis_client), MAX_AGE, registered=set, interval=600)
    assert gc.collect_garbage(Applier(redis_client), MAX_AGE, registered=set) is not None
    assert gc.totals(redis_client)["runs"] == 2
