import logging
import time

from celery import shared_task

from kvadmin.conf import knob
from kvadmin.conf import value_format as configured_value_format
from kvadmin.engines.models import Engine
from kvadmin.index import gc, status, value_format
from kvadmin.index.groups import group_of, index_groups
from kvadmin.index.pod_lock import DrainLock
from kvadmin.index.streams import push_stream
from kvadmin.index.writer import Applier
from kvadmin.ingest import pushed
from kvadmin.ingest.decode import UndecodableBatch, decode_batch, undecodable_batch
from kvadmin.ingest.streams import StreamSpec
from kvadmin.loop_guard import LoopGuard, guarded_run
from kvadmin.metrics import recorder
from kvadmin.redis_clients import ingest_bytes_client, ingest_client
from kvadmin.weights.active import active_applier, active_weights
from scoring import keys

log = logging.getLogger(__name__)


def _spec(engine: Engine, rank: int | None) -> StreamSpec:
    return StreamSpec(
        id=push_stream(engine.pod, rank),
        model=engine.model,
        kind=engine.kind,
        events_endpoint="",
        replay_endpoint=None,
        topic=b"",
        block_size=engine.block_size,
    )


@shared_task(name="kvadmin.ingest.apply_pushed", ignore_result=True)
def apply_pushed(pod: str) -> int:
    """Apply a pod's pushed batches in the order they were accepted; returns how many. The
    queue and its drain lock are on REDIS_URL, the index written on the model's group."""
    client = ingest_bytes_client()
    model = Engine.objects.filter(pod=pod).values_list("model", flat=True).first()
    group = group_of(model) if model is not None else index_groups()[-1]
    applier = active_applier(group.ingest_bytes_client())
    applied = 0
    while True:
        lock = DrainLock(client, pod)
        if not lock.acquire():
            return applied  # another task is draining this pod and will see our batches
        try:
            # Before the first batch: streams an older build kept pushes in must not live on
            # beside the new ones (the engine was told to resync).
            applier.forget_legacy_streams(pod)
            while lock.renew() and (entries := pushed.pending(client, pod)):
                _apply_chunk(applier, pod, entries)
                pushed.done(client, pod, entries[-1].seq)
                applied += len(entries)
        finally:
            lock.release()
        # A batch pushed while we released the lock would otherwise wait for the next push.
        if not client.llen(keys.push_queue_key(pod)):
            return applied


def _apply_chunk(applier: Applier, pod: str, entries: list[pushed.Pushed]) -> None:
    """Once per chunk: batches of a removed engine are dropped (its entries were purged), also
    when the pod is registered again meanwhile; so are those of a disabled engine, and those
    naming a rank the engine does not have (queued by an older build, or before dp_size
    changed)."""
    engine = Engine.objects.filter(pod=pod).first()
    refused: dict[str, int] = {}
    for entry in entries:
        if engine is None or entry.engine_id not in (engine.pk, None):
            why = "stale_pushes"
        elif not engine.enabled:
            why = "disabled_pushes"
        elif _apply_one(applier, engine, entry.seq, entry.payload):
            continue
        else:
            why = "bad_rank_pushes"
        refused[why] = refused.get(why, 0) + 1
    for why, count in refused.items():
        log.warning("%s: dropped %d pushed batches (%s)", pod, count, why)
        if engine is not None:  # the pod's engine shows how many it shed
            status.count(applier.client, push_stream(pod, 0), why, count)


def _apply_one(applier: Applier, engine: Engine, seq: int, payload: bytes) -> bool:
    """Apply one pushed batch; False when it names a rank the engine does not have."""
    try:
        batch = decode_batch(payload)
    except UndecodableBatch:  # validated by the API; the engine may have vanished since
        batch = undecodable_batch()
    if pushed.rank_error(batch.rank, engine.dp_size):
        return False
    spec = _spec(engine, batch.rank)
    started = time.perf_counter()
    applier.apply_batches(spec, [(seq, batch)])
    recorder.record_apply(applier.client, spec.id, [(seq, batch)], time.perf_counter() - started)
    return True


@shared_task(name="kvadmin.ingest.collect_garbage", ignore_result=True)
def collect_garbage(force: bool = False) -> None:
    """Beat sends this every minute; in each index group, a run happens once
    GC_INTERVAL_SECONDS have passed since the last one started there (at once with `force`),
    unless another process is running one. A group's registered pods are those of the models
    it holds: a pod left behind by a model moved to another group is collected like an
    unregistered one."""
    for group in index_groups():

        def registered(group=group) -> set[str]:
            engines = Engine.objects.values_list("pod", "model")
            return {pod for pod, model in engines if group_of(model) == group}

        try:
            gc.collect_garbage(
                active_applier(group.ingest_client(), chunk_size=gc.STEP_BLOCKS),
                knob("GC_MAX_AGE_SECONDS"),
                registered=registered,
                interval=None if force else knob("GC_INTERVAL_SECONDS"),
            )
        except gc.AnotherRunIsActive:
            continue


_rewrite_guard = LoopGuard("value_format_rewrite", log)


@shared_task(name="kvadmin.index.rewrite_values", ignore_result=True)
def rewrite_values() -> None:
    """Beat sends this every few seconds: while some of the index's values may not be in the
    INDEX_VALUE_FORMAT, a run of bounded steps (INDEX_REWRITE_SECONDS_PER_RUN long) moves the
    switch on from where the last one stopped (compatibility.md 2.7). A failed run is counted
    and logged once by its kind, and the runs within its backoff are skipped."""
    guarded_run(_rewrite_guard, _rewrite_run, ingest_client(), None)


def _rewrite_run() -> None:
    """Each index group switches on its own (its switch state is beside its values)."""
    for group in index_groups():
        try:
            value_format.rewrite(
                group.ingest_client(),
                configured_value_format(),
                active_weights().weights,
                keys_per_step=knob("INDEX_REWRITE_KEYS_PER_STEP"),
                seconds=knob("INDEX_REWRITE_SECONDS_PER_RUN"),
            )
        except value_format.AnotherRewriteIsActive:
            continue
