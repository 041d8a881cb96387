"""Apply decoded KV-event batches of one stream to the Redis index (compatibility.md 2.2, 2.3, 4.2,
5.4-5.7).

The index must equal the engines' true cache contents. This module turns events into script
arguments (standardized hashing happens here, in Python) and the scripts of `lua/` change
Redis (one per command, see `kvadmin.index.scripts`): one atomic EVALSHA of `apply-6.lua` per
run of batches, so a batch is applied exactly once even when two workers
race (the script refuses a seq at or below the stream's `last_seq`). Runs are short (see
`Applier`) and pipelined: Python encodes the next run while Redis applies this one. No sockets,
no Django.

Deployment: one Redis instance, or a primary with replicas. A batch touches many keys and
kthena's `matrix:kv:block:{model}@{hash}` cannot carry a hash tag, so its keys fall in many
Redis Cluster slots and a cluster would refuse the script.

Layout (key names from `scoring.keys`; pod = "{pod_name}.{namespace}", m = medium as the
engine spelled it, "" for none, std = decimal standardized hash):
- `matrix:kv:block:{model}@{std}` HASH pod -> "{ts}|{best m}" ("{ts}" when best m is "", and
  always under the legacy value format, compatibility.md 2.7):
  kthena's router reads it. ts = unix seconds (whole) of the pod's last store of the block.
- `{kind}:kv:block:{pod}@{engine hash}` STRING std, EX 86400: kthena's mapping, only with
  `mapping_keys` (KVADMIN_SIDECAR_MAPPING_KEYS=on, compatibility.md 2.3): kthena's router never
  reads it, only kthena's sidecar does. Set on each store with tokens, deleted when the last of
  the pod's streams (data-parallel ranks) holding the engine block drops it (by removal, clear,
  stream purge or garbage collection): the key is per pod, so a rank that lets a block go must
  not take it from a rank that holds it. The count of holders is read from the other streams'
  engine-blocks hashes, not kept apart. Garbage collection and purges delete the keys of what
  they drop whatever the setting, so those left from when it was on go too.
- `kvadmin:eb:{pod}|{stream}|{gen}:{bucket}` HASH engine hash -> "{std}|{m1},{m2}": what this
  stream holds, spread over `keys.ENGINE_BLOCK_BUCKETS` buckets by the engine hash's last
  digits (`kvadmin.index.engine_blocks`, the one reader of them) so that each stays a small
  listpack: a third of the bytes of one large hash per stream (docs/capacity.md section 1).
  The first medium is the primary tier (stored with tokens); placeholders append theirs. A
  block held in GPU alone is "{std}", in CPU alone "-{std}": integers, which a listpack keeps
  in 8 bytes. Values written before in the long form are read as well, and rewritten short by
  the next write or garbage collection touching them.
  `gen` is the stream status's `generation`: the live one, which a clear moves on.
- `kvadmin:res:{pod}|{m}` ZSET std -> last store time (`keys.residency_score`: unix
  microseconds), present iff some (stream, engine hash) holds std in m. Within one second,
  whole-second scores would order stores by hash, scattering each insert over the skiplist;
  microseconds put new stores at its tail and LRU evictions at its head, where Redis walks
  through cached nodes (ZADD and ZREM cost about 40% less, measured on the benchmark's mix).
  Integers, because Redis parses and prints them several times faster than fractions.
- `kvadmin:rc:{pod}` HASH "{std}|{m}" -> number of (stream, engine hash) pairs holding it, only
  when more than one does: the residency entry alone stands for one holder, which saves a
  write per store and per removal in the common case.
- `kvadmin:media:{pod}` SET of m with a residency ZSET; `kvadmin:ranks:{pod}` SET of stream
  names (`keys.stream_name`) with engine blocks; `kvadmin:pods` / `kvadmin:pod-kinds` HASH
  pod -> model / engine kind.
- `kvadmin:eb-retired:{pod}` HASH "{stream}|{gen}" -> next bucket: the generations of engine
  blocks retired by AllBlocksCleared or `purge_stream`, still counted in the refcounts until
  drained in chunks, bucket by bucket.
- Builds before issue 35 kept a stream's engine blocks in one hash, `kvadmin:eh:{pod}|{stream}`
  (and retired ones in `kvadmin:eh-retired:...`). Every command refuses a pod still holding
  any ("LEGACY_LAYOUT", nothing written) and the applier upgrades it (`upgrade_pod`) and runs
  the command again: an index is upgraded by the first command that touches each pod.
- `kvadmin:stream:{pod}|{stream}` HASH: last_seq, last_batch_ts (the engine's publish time of
  the last applied batch that has one), last_digest (the last applied batch's payload digest,
  absent when it had none), generation and the counters batches, events,
  blocks_stored, blocks_removed, clears, token_mismatch, unresolved_placeholders,
  unknown_removals, std_conflicts, skipped_{reason} (from the decoder), and per unknown event
  tag "unknown_tag:{tag}" for the first `UNKNOWN_TAGS_MAX` distinct tags of the stream (their
  number in "unknown_tags"): tags are engine-chosen text, so the hash stays bounded.

Decisions:
1. The matrix value names the best medium the pod holds the block in, by a `MediaPreference`.
   It is recomputed only when a medium appears or disappears for a (pod, std).
2. A removal with no medium (None or "") removes the medium-less entry when there is one,
   otherwise the primary tier: pre-medium vLLM sends GPU evictions without a medium, and an
   offloaded copy announced with its own medium stays until its own removal.
3. A placeholder (no tokens) resolves its engine hash through the stream's engine blocks,
   then through the pod's other streams' engine blocks: engine hash -> content is a function
   of the engine, so another rank's entry names the same content, and the placeholder itself
   says this rank holds it. Unresolvable ones are counted, not errors.
4. Tokens that do not pair with the hashes (vLLM hybrid models skip blocks) cannot be split
   safely: the event is counted and its hashes handled like placeholders.
5. A store whose engine hash is known with another std replaces the old entry (counted).
6. AllBlocksCleared moves the stream on to a new generation of engine blocks in O(1); the
   old generation keeps the refcounts right whatever follows, and the blocks are released in
   bounded chunks after the batch, before `apply_batches` returns. Purges are chunked the
   same way; nothing scans the keyspace.
7. A pod whose served model changed while it still has entries is purged first: its cached
   blocks belong to the old model.
"""

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import redis

from kvadmin.index.engine_blocks import is_legacy_layout
from kvadmin.index.events import (
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    EventBatch,
)
from kvadmin.index.scripts import script
from kvadmin.index.session import ApplyResult, ApplySession, ScriptCall, Submission
from kvadmin.index.streams import IndexedStream, StreamId
from scoring import keys
from scoring.hashing import block_hashes
from scoring.values import ValueFormat
from scoring.weights import DEFAULT_PREFERENCE, MediaPreference

MAX_CHUNK = 5000
"""Lua's unpack() takes about 8,000 values; chunks stay well below."""


@dataclass(frozen=True, slots=True)
class ExpireStep:
    """What one garbage-collection step did (see `Applier.expire_step`)."""

    progress: str
    ownerships: int
    """(std, medium) residency entries of the pod that went."""
    fields: int
    """Matrix fields (blocks the router saw the pod own) that went."""
    scanned: int
    """Engine blocks looked at."""
    compacted: int = 0
    """Engine-block values rewritten in their short form (`kvadmin.index.engine_blocks`)."""


def _prefix(key: str, suffix: str) -> str:
    """The part of a key before its variable suffix; the script appends the suffix itself,
    so the key layout keeps one source of truth in `scoring.keys`."""
    if not key.endswith(suffix):
        raise AssertionError(f"{key!r} does not end with its variable part {suffix!r}")
    return key.removesuffix(suffix)


@lru_cache(maxsize=4096)
def _pod_keys(pod: str, model: str, kind: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The KEYS of every index script and the pod part of their ARGV (lua/includes/pod_args.lua),
    less the value format, the mapping-key setting and the media preference
    (`Applier.script_args`)."""
    script_keys = (
        keys.refcount_key(pod),
        keys.pod_media_key(pod),
        keys.pod_ranks_key(pod),
        keys.retired_set_key(pod),
        keys.POD_MODELS_KEY,
        keys.POD_KINDS_KEY,
    )
    args = (
        pod,
        _prefix(keys.block_key(model, 0), "0"),
        _prefix(keys.engine_hash_key(kind, pod, "0"), "0"),
        _prefix(keys.engine_blocks_key(pod, "0", 0, 0), "0|0:000"),
        _prefix(keys.residency_key(pod, "0"), "0"),
        _prefix(keys.stream_status_key(pod, "0"), "0"),
        _prefix(keys.legacy_engine_blocks_key(pod, "0"), "0"),
        _prefix(keys.legacy_retired_blocks_key(pod, "0", 0), "0|0"),
        keys.legacy_retired_set_key(pod),
        str(keys.ENGINE_BLOCK_BUCKETS),
        model,
        kind,
    )
    return script_keys, args


def _preference_args(preference: MediaPreference) -> list[str]:
    """The media preference in the script's ARGV: fallback position, count, names."""
    return [
        str(preference.fallback_position),
        str(len(preference.best_first)),
        *preference.best_first,
    ]


def _medium(medium: str | None) -> str:
    """None and "" both mean no medium. A comma would split the engine-blocks media list, so
    it becomes "_" (no engine spells a medium with one)."""
    return medium.replace(",", "_") if medium else ""


def _encode(seq: int, batch: EventBatch, out: list[str]) -> tuple[int, dict[str, int]]:
    """Append one batch's script arguments to `out`: seq, publish time ("" when unknown),
    payload digest ("" when unknown), body length, counters, operations.

    Operations: "S" m n (engine hash, std)*n for stores with tokens, "P" m n hash*n for
    placeholders, "R" m n hash*n for removals, "C" for AllBlocksCleared, and "M" m n from
    hash*n for a placeholder of one block in m directly followed by the removal of that block
    from another medium `from` (vLLM's offload: the block reaches CPU, then leaves GPU; the
    script does less work for the pair). Only single blocks pair up: the events of several
    blocks apply all placeholders before all removals, which a pair per block would reorder.
    Consecutive events of one operation and media make one operation (vLLM sends one event
    per removed or offloaded block). Returns the number of blocks (to bound a script call)
    and the counters Python knows.
    """
    body: list[str] = []
    opened: tuple[str, ...] = ()  # the open operation: kind and media
    count_at = 0  # where its count sits in `body`
    blocks = mismatched = 0

    def extend(n: int, kind: str, medium: str | None, *more: str) -> None:
        nonlocal opened, count_at
        operation = (kind, _medium(medium), *more)
        if operation == opened:
            body[count_at] = str(int(body[count_at]) + n)
        else:
            opened, count_at = operation, len(body) + 2
            body.extend((kind, operation[1], str(n), *more))

    events = batch.events
    folded = False  # the event is a removal folded into the placeholder before it
    for i, event in enumerate(events):
        if folded:
            folded = False
        elif isinstance(event, BlockStored):
            hashes, tokens, size = event.block_hashes, event.token_ids, event.block_size
            n = len(hashes)
            if not n:
                continue
            blocks += n
            if tokens and size > 0 and len(tokens) == n * size:
                extend(n, "S", event.medium)
                for engine_hash, std in zip(hashes, block_hashes(tokens, size, n), strict=True):
                    body.append(engine_hash)
                    body.append(str(std))
                continue
            mismatched += bool(tokens)
            after = events[i + 1] if i + 1 < len(events) else None
            if (
                n == 1
                and isinstance(after, BlockRemoved)
                and after.block_hashes == hashes
                and _medium(after.medium) != _medium(event.medium)
            ):
                extend(n, "M", event.medium, _medium(after.medium))
                blocks += n
                folded = True
            else:
                extend(n, "P", event.medium)
            body += hashes
        elif isinstance(event, BlockRemoved):
            if event.block_hashes:
                blocks += len(event.block_hashes)
                extend(len(event.block_hashes), "R", event.medium)
                body += event.block_hashes
        elif isinstance(event, AllBlocksCleared):
            body.append("C")
            opened = ()
    counters = {"events": len(batch.events)}
    if mismatched:
        counters["token_mismatch"] = mismatched
    for reason, count in batch.skipped.items():
        counters[f"skipped_{reason}"] = count
    for tag, count in batch.unknown_tags.items():
        counters[keys.UNKNOWN_TAG_FIELD_PREFIX + tag] = count
    head = [str(len(counters))]
    for name, count in counters.items():
        head += (name, str(count))
    ts = repr(batch.ts) if batch.ts > 0 else ""
    out += (str(seq), ts, batch.digest, str(len(head) + len(body)))
    out += head
    out += body
    return blocks, counters


def _text(value: bytes | str | None) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


class Applier:
    """Maintains the index from one stream's batches; also purges streams and pods.

    Works with text or bytes clients. `blocks_per_call` bounds one script call: a script
    blocks every other Redis client, the router's reads included, so calls stay at a few
    milliseconds (10 to 30 us of Redis time per block, by machine); pipelining keeps the
    throughput of longer calls. `chunk_size` bounds one step of a drain or purge the same way.

    `mapping_keys`: whether it keeps kthena's sidecar mapping keys (compatibility.md 2.3).

    `preference` gives the media order of the matrix values (compatibility.md 5.4); it is
    asked at every command (once per submission of a session), so a long-lived applier
    follows the tier weights when they change. Product code builds its appliers with
    `kvadmin.weights.active.active_applier` (the active weights' order); the default is the
    order of kthena's default weights.
    """

    def __init__(
        self,
        client: redis.Redis,
        preference: Callable[[], MediaPreference] = lambda: DEFAULT_PREFERENCE,
        chunk_size: int = 1000,
        blocks_per_call: int = 256,
        value_format: ValueFormat = ValueFormat.TIERED,
        mapping_keys: bool = False,
    ) -> None:
        if not 0 < chunk_size <= MAX_CHUNK:
            raise ValueError(f"chunk_size must be within 1..{MAX_CHUNK}")
        self.client = client
        self.preference = preference
        self.value_format = value_format
        self.mapping_keys = mapping_keys
        self.chunk_size = chunk_size
        self.blocks_per_call = blocks_per_call
        self.scripts = {
            command: script(command)
            for command in ("apply", "retire", "drain", "purge", "expire", "sweep", "upgrade")
        }

    def apply_batch(
        self,
        pod: str,
        model: str,
        kind: str,
        rank: int,
        seq: int,
        batch: EventBatch,
        now: float | None = None,
    ) -> ApplyResult:
        stream = IndexedStream(StreamId(pod, rank), model, kind)
        return self.apply_batches(stream, [(seq, batch)], now)[0]

    def apply_batches(
        self,
        stream: IndexedStream,
        batches: Sequence[tuple[int, EventBatch]],
        now: float | None = None,
    ) -> list[ApplyResult]:
        """Apply (seq, batch) pairs of one stream in seq order, in as few round trips as
        `blocks_per_call` allows; seqs at or below the last applied one are skipped."""
        results: list[ApplyResult] = []
        session = self.session()
        try:
            session.submit(stream, batches, now, results.extend)
            session.wait()
        finally:
            session.close()
        return results

    def session(self, window: int = 1) -> ApplySession:
        """A connection on which script calls go out ahead of their replies (see
        `ApplySession`); `window` is how many calls may wait for theirs."""
        return ApplySession(self, window)

    def purge_stream(self, pod: str, stream: str) -> None:
        """Remove one stream's engine blocks (a DP rank's publisher restarted or lost events);
        the pod's other streams keep theirs. `stream` is its key name (`StreamId.name`).
        Leaves `last_seq` to the caller."""
        model, kind = self._pod_identity(pod)
        self._run("retire", pod, model, kind, [stream])
        self.drain(pod, model, kind)

    def forget_legacy_streams(self, pod: str) -> int:
        """Purge the streams of the pod named as no current stream is: builds before pushed
        streams had a key space of their own kept rank r's pushed batches as "rank -(r + 1)".
        Their entries go with their status (the next push is told to resync, see
        `kvadmin.ingest.pushed`); returns how many streams went."""
        names = {_text(name) for name in self.client.smembers(keys.pod_ranks_key(pod))}
        legacy = sorted(name for name in names if keys.parse_stream_name(name) is None)
        for name in legacy:
            self.purge_stream(pod, name)
            self.client.delete(keys.stream_status_key(pod, name))
        return len(legacy)

    def purge_pod(self, pod: str) -> int:
        """Remove every entry of the pod, every rank, in bounded steps; returns how many
        matrix fields (blocks the router saw the pod own) went. Stop its ingestion first."""
        model, kind = self._pod_identity(pod)
        removed = 0
        while True:
            more, count = self._run("purge", pod, model, kind, [str(self.chunk_size)])
            removed += count
            if not more:
                return removed

    def forget_pod(self, pod: str, streams: Iterable[str] = ()) -> int:
        """`purge_pod` for a pod whose engine left the registry: the status of its streams
        goes too (last seq, counters, start time), so an engine registered again under that
        name starts afresh; an old last seq would make its first batches look applied
        already. The streams are those named in `streams` (`StreamId.name`) and those the
        index holds blocks of."""
        indexed = self.client.smembers(keys.pod_ranks_key(pod))
        removed = self.purge_pod(pod)
        names = {_text(name) for name in indexed} | set(streams)
        if names:
            self.client.delete(*(keys.stream_status_key(pod, name) for name in names))
        return removed

    def drain_pod(self, pod: str) -> None:
        """Release every retired engine block of the pod (left by a worker that died between
        a clear or stream purge and its drain), in bounded steps."""
        model, kind = self._pod_identity(pod)
        self.drain(pod, model, kind)

    def upgrade_pod(self, pod: str) -> None:
        """Move the pod's engine blocks from the layout of builds before issue 35 to today's,
        in bounded steps (lua/upgrade-6.lua). Commands run it themselves when they meet such
        a pod."""
        model, kind = self._pod_identity(pod)
        while self._run("upgrade", pod, model, kind, [str(self.chunk_size)]):
            pass

    def expire_step(self, pod: str, stream: str, cursor: str, cutoff: int) -> ExpireStep:
        """One bounded garbage-collection step over a stream's engine blocks (whole buckets,
        about `chunk_size` entries): media whose residency is older than `cutoff` (unix
        seconds) are dropped as removals would drop them. Start at cursor "0"; the returned
        cursor is "0" again when the scan is complete. Values kept in their long form
        ("{std}|GPU", as builds before the short values wrote them) are rewritten short."""
        model, kind = self._pod_identity(pod)
        before = str(keys.residency_score(cutoff))
        own = [stream, cursor, before, str(self.chunk_size)]
        reply = self._run("expire", pod, model, kind, own)
        progress, owned, fields, scanned, compacted = reply
        return ExpireStep(
            _text(progress) or "0", int(owned), int(fields), int(scanned), int(compacted)
        )

    def sweep_step(self, pod: str, medium: str, cutoff: int) -> ExpireStep:
        """One bounded step releasing up to `chunk_size` residency entries of the pod in
        `medium` older than `cutoff` that no engine block holds (normally none after
        `expire_step` went over every rank). `progress` is "1" while more may be left, "0"
        when done and "-1" when retired engine blocks must be drained first."""
        model, kind = self._pod_identity(pod)
        before = str(keys.residency_score(cutoff))
        reply = self._run("sweep", pod, model, kind, [medium, before, str(self.chunk_size)])
        return ExpireStep(str(reply[0]), int(reply[1]), int(reply[2]), int(reply[3]))

    def encoded_calls(
        self, submission: Submission, head: list[str], batches: Sequence[tuple[int, EventBatch]]
    ) -> Iterator[ScriptCall]:
        """Runs of batches of at most about `blocks_per_call` blocks, encoded when needed."""
        call = ScriptCall(submission, list(head))
        blocks = 0
        for seq, batch in batches:
            count, counters = _encode(seq, batch, call.args)
            call.batches.append((seq, counters))
            blocks += count
            if blocks >= self.blocks_per_call:
                yield call
                call, blocks = ScriptCall(submission, list(head)), 0
        if call.batches:
            yield call

    def drain(
        self, pod: str, model: str, kind: str, preference: MediaPreference | None = None
    ) -> None:
        """Release the pod's retired engine blocks in bounded steps, the values they leave
        ordered by `preference` (by default the applier's own)."""
        while self._run("drain", pod, model, kind, [str(self.chunk_size)], preference):
            pass

    def script_args(
        self, pod: str, model: str, kind: str, preference: MediaPreference
    ) -> tuple[tuple[str, ...], list[str]]:
        """The KEYS of every index script and the part of ARGV they share; each command's
        own arguments follow (see its script's Input header)."""
        script_keys, pod_args = _pod_keys(pod, model, kind)
        preference_args = _preference_args(preference)
        mapping = "on" if self.mapping_keys else "off"
        return script_keys, [*pod_args, self.value_format.value, mapping, *preference_args]

    def _run(
        self,
        command: str,
        pod: str,
        model: str,
        kind: str,
        own: Sequence[str],
        preference: MediaPreference | None = None,
    ) -> Any:
        script_keys, args = self.script_args(pod, model, kind, preference or self.preference())
        run = self.scripts[command]
        try:
            return run(self.client, script_keys, [*args, *own])
        except redis.ResponseError as error:
            if not is_legacy_layout(error) or command == "upgrade":
                raise
        self.upgrade_pod(pod)
        return run(self.client, script_keys, [*args, *own])

    def _pod_identity(self, pod: str) -> tuple[str, str]:
        """The pod's model and engine kind as the index knows them ("" when it does not)."""
        pipe = self.client.pipeline(transaction=False)
        pipe.hget(keys.POD_MODELS_KEY, pod)
        pipe.hget(keys.POD_KINDS_KEY, pod)
        model, kind = pipe.execute()
        return _text(model) or "", _text(kind) or ""
