"""Stream ownership: each stream is read by exactly one worker, through a renewed Redis lease.

Workers announce themselves in a heartbeat ZSET; each takes at most its fair share of the
streams, so streams spread over workers and a dead worker's streams are taken over once its
leases expire.
"""

import math
import threading

import redis

from kvadmin.index.streams import StreamId
from scoring import keys
from scoring.keys import stream_lease_key
from scoring.scripts import package_script

_RENEW = package_script(__file__, "lease_renew")
_CLAIM = package_script(__file__, "lease_claim")
_RELEASE = package_script(__file__, "lease_release")


class Leases:
    def __init__(self, client: redis.Redis, worker_id: str, lease_seconds: float) -> None:
        self.client = client
        self.worker_id = worker_id
        self.lease_ms = int(lease_seconds * 1000)

    def heartbeat(self, now: float) -> int:
        """Announce this worker; returns how many workers are alive."""
        pipe = self.client.pipeline(transaction=False)
        pipe.zadd(keys.WORKERS_KEY, {self.worker_id: now})
        pipe.zremrangebyscore(keys.WORKERS_KEY, "-inf", now - self.lease_ms / 1000)
        pipe.zcard(keys.WORKERS_KEY)
        return max(1, int(pipe.execute()[-1]))

    def leave(self) -> None:
        self.client.zrem(keys.WORKERS_KEY, self.worker_id)

    @staticmethod
    def fair_share(streams: int, workers: int) -> int:
        return math.ceil(streams / max(1, workers))

    def claim(self, stream: StreamId) -> bool:
        key = stream_lease_key(stream.pod, stream.name)
        return bool(_CLAIM(self.client, [key], [self.worker_id, self.lease_ms]))

    def renew(self, streams: list[StreamId]) -> set[StreamId]:
        """Extend this worker's leases; returns the streams it no longer owns."""
        if not streams:
            return set()
        keys = [stream_lease_key(s.pod, s.name) for s in streams]
        lost = _RENEW(self.client, keys, [self.worker_id, self.lease_ms])
        return {streams[int(i) - 1] for i in lost}

    def release(self, stream: StreamId) -> None:
        _RELEASE(self.client, [stream_lease_key(stream.pod, stream.name)], [self.worker_id])

    def owner(self, stream: StreamId) -> str | None:
        owner = self.client.get(stream_lease_key(stream.pod, stream.name))
        return owner.decode() if isinstance(owner, bytes) else owner


class LeaseKeeper:
    """Renews a worker's leases from its own thread, every third of the lease time, so that a
    long replay or a backlog in the reading thread never lets them lapse.

    The reading thread publishes what it owns through `owned` and collects what was lost.
    """

    def __init__(self, leases: Leases, stop: threading.Event) -> None:
        self.leases = leases
        self.stop = stop
        self.owned: tuple[StreamId, ...] = ()
        self._lost: set[StreamId] = set()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="kvadmin-leases", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self) -> None:
        """Wait for a renewal in flight once `stop` is set (a call's own socket timeout bounds
        it), so that nothing renews what the reading thread then releases."""
        if self._thread.is_alive():
            self._thread.join()

    def take_lost(self) -> set[StreamId]:
        with self._lock:
            lost, self._lost = self._lost, set()
        return lost

    def _run(self) -> None:
        interval = self.leases.lease_ms / 3000
        while not self.stop.wait(interval):
            try:
                lost = self.leases.renew(list(self.owned))
            except Exception:
                continue  # the reading thread meets the same failure, counts it and recovers
            with self._lock:
                self._lost |= lost
