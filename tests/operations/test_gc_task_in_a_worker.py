"""The beat task runs garbage collection in a real Celery worker: stale ownership goes, fresh
stays, unregistered pods are purged, and the report reaches Redis for the dashboard."""

import time

import pytest

from kvadmin.engines.models import Engine
from kvadmin.index import gc
from kvadmin.index.writer import Applier
from kvadmin.ingest.tasks import collect_garbage
from scoring.keys import POD_MODELS_KEY, block_key
from tests.index import MODEL, std
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_task_collects_the_index(celery_worker, redis_client, index) -> None:
    Engine.objects.create(pod="kept.ns", model=MODEL, kind="vllm", events_endpoint="tcp://h:1")
    two_days_ago = time.time() - 2 * 86400
    index.store("kept.ns", [1], at=two_days_ago)
    index.store("kept.ns", [2], at=time.time())
    index.store("gone.ns", [3], at=time.time())

    collect_garbage.delay(force=True)
    report = wait_until(lambda: gc.last_run(redis_client), timeout=30, what="a GC run")

    assert (report.ownerships, report.blocks, report.pods_purged) == (1, 1, 1)
    assert redis_client.exists(block_key(MODEL, std(1)), block_key(MODEL, std(3))) == 0
    assert redis_client.hget(block_key(MODEL, std(2)), "kept.ns").endswith("|GPU")
    assert redis_client.hkeys(POD_MODELS_KEY) == ["kept.ns"]
    assert gc.totals(redis_client)["runs"] == 1


def test_the_task_waits_for_the_interval(celery_worker, redis_client) -> None:
    """Beat sends it every minute; without `force` a run happens only when one is due."""
    gc.collect_garbage(Applier(redis_client), 86400, registered=set)

    collect_garbage.delay()
    collect_garbage.delay(force=True)
    wait_until(lambda: gc.totals(redis_client)["runs"] == 2, timeout=30, what="the forced run")
    assert gc.totals(redis_client)["runs"] == 2
