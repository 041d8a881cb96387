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
- `{kind}:kv:block:{pod}@{engine hash}` STRING std, EX 86400: kthena's mapping, set on each
  store with tokens, deleted when the last of the pod's streams (data-parallel ranks) holding
  the engine block drops it (by removal, clear, stream purge or garbage collection): the key
  is per pod, so a rank that lets a block go must not take it from a rank that holds it. The
  count of holders is read from the other streams' engine-blocks hashes, not kept apart.
- `kvadmin:eh:{pod}|{stream}` HASH engine hash -> "{std}|{m1},{m2}": what this stream holds.
  The first medium is the primary tier (stored with tokens); placeholders append theirs.
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
- `kvadmin:eh-retired:{pod}|{stream}|{gen}` HASH (registered in `kvadmin:retired:{pod}`): a
  stream's engine blocks moved aside by AllBlocksCleared or `purge_stream`, still counted in
  the refcounts until drained in chunks.
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
   then through the pod's mapping key: engine hash -> content is a function of the engine, so
   another rank's mapping names the same content, and the placeholder itself says this rank
   holds it. Unresolvable ones are counted, not errors.
4. Tokens that do not pair with the hashes (vLLM hybrid models skip blocks) cannot be split
   safely: the event is counted and its hashes handled like placeholders.
5. A store whose engine hash is known with another std replaces the old entry (counted).
6. AllBlocksCleared renames the stream's engine-blocks hash away in O(1); the rename keeps
   the refcounts right whatever follows, and the blocks are released in bounded chunks after
   the batch, before `apply_batches` returns. Purges are chunked the same way; nothing scans
   the keyspace.
7. A pod whose served model changed while it still has entries is purged first: its cached
   blocks belong to the old model.
"""

import contextlib
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import redis
from hiredis import pack_command
from redis.exceptions import NoScriptError

from kvadmin.index.events import (
    UNKNOWN_TAGS_MAX,
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    EventBatch,
)
from kvadmin.index.scripts import script
from kvadmin.index.streams import IndexedStream, StreamId
from scoring import keys
from scoring.hashing import block_hashes
from scoring.values import ValueFormat
from scoring.weights import DEFAULT_PREFERENCE, MediaPreference

SCRIPT_COUNTERS = (
    "blocks_stored",
    "blocks_removed",
    "clears",
    "unresolved_placeholders",
    "unknown_removals",
    "std_conflicts",
)
"""Per-batch counts the apply script returns, in its order."""

MAX_CHUNK = 5000
"""Lua's unpack() takes about 8,000 values; chunks stay well below."""


@dataclass(frozen=True, slots=True)
class ApplyResult:
    seq: int
    applied: bool
    """False when the seq was at or below the stream's last applied one: nothing changed."""
    counts: dict[str, int] = field(default_factory=dict)
    """What this batch added to the stream's counters (empty for a duplicate)."""

    @property
    def duplicate(self) -> bool:
        return not self.applied


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


def _prefix(key: str, suffix: str) -> str:
    """The part of a key before its variable suffix; the script appends the suffix itself,
    so the key layout keeps one source of truth in `scoring.keys`."""
    if not key.endswith(suffix):
        raise AssertionError(f"{key!r} does not end with its variable part {suffix!r}")
    return key.removesuffix(suffix)


@lru_cache(maxsize=4096)
def _pod_keys(pod: str, model: str, kind: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The KEYS of every index script and the pod part of their ARGV (lua/includes/pod_args.lua),
    less the value format and the media preference (`_script_args`)."""
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
        _prefix(keys.engine_blocks_key(pod, "0"), "0"),
        _prefix(keys.residency_key(pod, "0"), "0"),
        _prefix(keys.stream_status_key(pod, "0"), "0"),
        _prefix(keys.retired_blocks_key(pod, "0", 0), "0|0"),
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


@dataclass(slots=True)
class _Submission:
    """One `ApplySession.submit`: its script calls and who wants their results."""

    stream: StreamId
    model: str
    kind: str
    preference: MediaPreference
    done: Callable[["ApplyResults"], None] | None
    calls: list["_Call"] = field(default_factory=list)
    unread: int = 0
    """Calls sent whose reply is not read yet."""
    sealed: bool = False
    """Every call is sent."""

    def finish_if_complete(self) -> None:
        if self.sealed and not self.unread and self.done is not None:
            done, self.done = self.done, None
            done(ApplyResults(self.calls))


@dataclass(slots=True)
class _Call:
    """One script call: its arguments, and per batch its seq and the counters Python knows."""

    submission: _Submission
    args: list[str]
    batches: list[tuple[int, dict[str, int]]] = field(default_factory=list)
    reply: list[int] | None = None
    """Set once read: the script's reply (see `results`)."""

    def results(self) -> Iterator[ApplyResult]:
        width = 1 + len(SCRIPT_COUNTERS)
        for i, (seq, counters) in enumerate(self.batches):
            applied, *counts = self.reply[1 + i * width : 1 + (i + 1) * width]
            if applied:
                script_counts = dict(zip(SCRIPT_COUNTERS, counts, strict=True))
                yield ApplyResult(seq, True, counters | script_counts)
            else:
                yield ApplyResult(seq, False)


class ApplyResults(Sequence[ApplyResult]):
    """One result per batch of a submission, in seq order, built when first looked at: the
    ingest loop never looks, and building them cost it about 4% of its time (0.6 us per
    stored block on the benchmark)."""

    def __init__(self, calls: list[_Call]) -> None:
        self._calls = calls
        self._results: list[ApplyResult] | None = None

    def _built(self) -> list[ApplyResult]:
        if self._results is None:
            self._results = [result for call in self._calls for result in call.results()]
        return self._results

    def __getitem__(self, index: int) -> ApplyResult:
        return self._built()[index]

    def __len__(self) -> int:
        return len(self._built())


def _text(value: bytes | str | None) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


class Applier:
    """Maintains the index from one stream's batches; also purges streams and pods.

    Works with text or bytes clients. `blocks_per_call` bounds one script call: a script
    blocks every other Redis client, the router's reads included, so calls stay at a few
    milliseconds (10 to 30 us of Redis time per block, by machine); pipelining keeps the
    throughput of longer calls. `chunk_size` bounds one step of a drain or purge the same way.
    """

    def __init__(
        self,
        client: redis.Redis,
        preference: MediaPreference = DEFAULT_PREFERENCE,
        chunk_size: int = 1000,
        blocks_per_call: int = 256,
        value_format: ValueFormat = ValueFormat.TIERED,
    ) -> None:
        if not 0 < chunk_size <= MAX_CHUNK:
            raise ValueError(f"chunk_size must be within 1..{MAX_CHUNK}")
        self.client = client
        self.preference = preference
        self.value_format = value_format
        self.chunk_size = chunk_size
        self.blocks_per_call = blocks_per_call
        self.scripts = {
            command: script(command)
            for command in ("apply", "retire", "drain", "purge", "expire", "sweep")
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
        preference: MediaPreference | None = None,
    ) -> ApplyResult:
        stream = IndexedStream(StreamId(pod, rank), model, kind)
        return self.apply_batches(stream, [(seq, batch)], now, preference)[0]

    def apply_batches(
        self,
        stream: IndexedStream,
        batches: Sequence[tuple[int, EventBatch]],
        now: float | None = None,
        preference: MediaPreference | None = None,
    ) -> list[ApplyResult]:
        """Apply (seq, batch) pairs of one stream in seq order, in as few round trips as
        `blocks_per_call` allows; seqs at or below the last applied one are skipped."""
        results: list[ApplyResult] = []
        session = self.session()
        try:
            session.submit(stream, batches, now, preference, results.extend)
            session.wait()
        finally:
            session.close()
        return results

    def session(self, window: int = 1) -> "ApplySession":
        """A connection on which script calls go out ahead of their replies (see
        `ApplySession`); `window` is how many calls may wait for theirs."""
        return ApplySession(self, window)

    def purge_stream(self, pod: str, stream: str) -> None:
        """Remove one stream's engine blocks (a DP rank's publisher restarted or lost events);
        the pod's other streams keep theirs. `stream` is its key name (`StreamId.name`).
        Leaves `last_seq` to the caller."""
        model, kind = self._pod_identity(pod)
        self._run("retire", pod, model, kind, [stream])
        self._drain(pod, model, kind)

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
        self._drain(pod, model, kind)

    def expire_step(self, pod: str, stream: str, cursor: str, cutoff: int) -> ExpireStep:
        """One bounded garbage-collection step over a stream's engine blocks (an HSCAN step
        of about `chunk_size` entries): media whose residency is older than `cutoff` (unix
        seconds) are dropped as removals would drop them. Start at cursor "0"; the returned
        cursor is "0" again when the scan is complete."""
        model, kind = self._pod_identity(pod)
        before = str(keys.residency_score(cutoff))
        own = [stream, cursor, before, str(self.chunk_size)]
        reply = self._run("expire", pod, model, kind, own)
        return ExpireStep(_text(reply[0]) or "0", int(reply[1]), int(reply[2]), int(reply[3]))

    def sweep_step(self, pod: str, medium: str, cutoff: int) -> ExpireStep:
        """One bounded step releasing up to `chunk_size` residency entries of the pod in
        `medium` older than `cutoff` that no engine block holds (normally none after
        `expire_step` went over every rank). `progress` is "1" while more may be left, "0"
        when done and "-1" when retired engine blocks must be drained first."""
        model, kind = self._pod_identity(pod)
        before = str(keys.residency_score(cutoff))
        reply = self._run("sweep", pod, model, kind, [medium, before, str(self.chunk_size)])
        return ExpireStep(str(reply[0]), int(reply[1]), int(reply[2]), int(reply[3]))

    def _calls(
        self, submission: _Submission, head: list[str], batches: Sequence[tuple[int, EventBatch]]
    ) -> Iterator[_Call]:
        """Runs of batches of at most about `blocks_per_call` blocks, encoded when needed."""
        call = _Call(submission, list(head))
        blocks = 0
        for seq, batch in batches:
            count, counters = _encode(seq, batch, call.args)
            call.batches.append((seq, counters))
            blocks += count
            if blocks >= self.blocks_per_call:
                yield call
                call, blocks = _Call(submission, list(head)), 0
        if call.batches:
            yield call

    def _drain(
        self, pod: str, model: str, kind: str, preference: MediaPreference | None = None
    ) -> None:
        while self._run("drain", pod, model, kind, [str(self.chunk_size)], preference):
            pass

    def _script_args(
        self, pod: str, model: str, kind: str, preference: MediaPreference | None
    ) -> tuple[tuple[str, ...], list[str]]:
        """The KEYS of every index script and the part of ARGV they share; each command's
        own arguments follow (see its script's Input header)."""
        script_keys, pod_args = _pod_keys(pod, model, kind)
        preference_args = _preference_args(preference or self.preference)
        return script_keys, [*pod_args, self.value_format.value, *preference_args]

    def _run(
        self,
        command: str,
        pod: str,
        model: str,
        kind: str,
        own: Sequence[str],
        preference: MediaPreference | None = None,
    ) -> Any:
        script_keys, args = self._script_args(pod, model, kind, preference)
        return self.scripts[command](keys=script_keys, args=[*args, *own], client=self.client)

    def _pod_identity(self, pod: str) -> tuple[str, str]:
        """The pod's model and engine kind as the index knows them ("" when it does not)."""
        pipe = self.client.pipeline(transaction=False)
        pipe.hget(keys.POD_MODELS_KEY, pod)
        pipe.hget(keys.POD_KINDS_KEY, pod)
        model, kind = pipe.execute()
        return _text(model) or "", _text(kind) or ""


class ApplySession:
    """Script calls sent ahead of their replies on one connection: while Redis applies them,
    the caller goes on (the ingest loop decodes the next batches), and at most `window`
    calls wait for their reply at any time.

    `submit` returns once its calls are sent; their results reach its `done` callback when
    the replies are read, which happens when the window is full or on `wait`. Commands
    given to `send` follow on the same connection, so they run after the calls sent
    before them. After any exception the session is spent: `close` drops the connection
    with the replies still unread, whose calls may or may not have been applied (as after
    a lost connection; the stream's `last_seq` in Redis says which).
    """

    def __init__(self, applier: Applier, window: int) -> None:
        self.applier = applier
        self.window = window
        self.pool = applier.client.connection_pool
        self.connection = self.pool.get_connection()
        self.in_flight: deque[_Call | None] = deque()
        """Replies to read, in order: a script call's, or None for a command of `send`."""
        self.calls = 0
        """Script calls in `in_flight`."""
        self.unanswered: dict[StreamId, _Call] = {}
        """Per stream, its last script call in `in_flight`."""
        self.retired: dict[str, _Submission] = {}
        """Pods whose calls cleared a stream: their retired engine blocks wait to be drained."""
        self.spent = False

    def submit(
        self,
        stream: IndexedStream,
        batches: Sequence[tuple[int, EventBatch]],
        now: float | None = None,
        preference: MediaPreference | None = None,
        done: Callable[["ApplyResults"], None] | None = None,
    ) -> None:
        """Send one stream's (seq, batch) pairs, in seq order, as script calls of at most
        about `blocks_per_call` blocks each, encoding the next call while Redis applies
        this one."""
        applier = self.applier
        model, kind = stream.model, stream.kind
        preference = preference or applier.preference
        submission = _Submission(stream.id, model, kind, preference, done)
        script_keys, head = applier._script_args(stream.id.pod, model, kind, preference)
        head += [
            stream.id.name,
            str(keys.residency_score(time.time() if now is None else now)),
            str(keys.ENGINE_HASH_TTL_SECONDS),
            str(UNKNOWN_TAGS_MAX),
            "",  # after: set per call
        ]
        with self._spending():
            sha = applier.scripts["apply"].sha
            command = ("EVALSHA", sha, str(len(script_keys)), *script_keys)
            for call in applier._calls(submission, head, batches):
                # A call must not apply when the stream's call before it failed (see
                # `_again`): the script checks that one's last seq is applied.
                before = self.unanswered.get(stream.id)
                call.args[len(head) - 1] = str(before.batches[-1][0]) if before else ""
                self.unanswered[stream.id] = call
                submission.calls.append(call)
                submission.unread += 1
                # hiredis packs the thousands of arguments of a call in C; redis-py's
                # send_command would first look at each of them in Python.
                self.connection.send_packed_command([pack_command((*command, *call.args))])
                self.in_flight.append(call)
                self.calls += 1
                while self.calls > self.window:
                    self._read()
            submission.sealed = True
            submission.finish_if_complete()
            self._drain_retired()

    def send(self, pipeline: "redis.client.Pipeline") -> None:
        """Send a pipeline's commands after the calls submitted so far, without waiting; an
        error reply raises when it is read."""
        with self._spending():
            for args, _options in pipeline.command_stack:
                self.connection.send_command(*args)
                self.in_flight.append(None)
        pipeline.reset()

    def wait(self) -> None:
        """Read every outstanding reply, then drain what cleared streams retired."""
        with self._spending():
            while self.in_flight:
                self._read()
            self._drain_retired()

    def close(self) -> None:
        """Give the connection back; unread replies must not reach its next user."""
        if self.spent or self.in_flight:
            self.connection.disconnect()
            self.in_flight.clear()
            self.unanswered.clear()
            self.spent = True
        self.pool.release(self.connection)

    @contextlib.contextmanager
    def _spending(self) -> Iterator[None]:
        if self.spent:
            raise RuntimeError("this apply session failed before; start another")
        try:
            yield
        except BaseException:
            self.spent = True
            raise

    def _drain_retired(self) -> None:
        """Release the engine blocks that the calls read so far retired (on another
        connection: draining commutes with the calls still in flight)."""
        retired, self.retired = self.retired, {}
        for pod, submission in sorted(retired.items()):
            self.applier._drain(pod, submission.model, submission.kind, submission.preference)

    def _read(self) -> None:
        failed = self._read_one()
        if failed is not None:
            # The failed call changed nothing (a missing script, or a model change found
            # before any write), and the calls of its stream sent after it failed too (the
            # script refuses them as out of order), whatever another client did meanwhile:
            # read every reply, then remove the causes and run the failed calls again.
            failures = [failed]
            while self.in_flight:
                if (failed := self._read_one()) is not None:
                    failures.append(failed)
            self._again(failures)

    def _read_one(self) -> tuple[_Call, redis.ResponseError] | None:
        """Read the next reply; a script call's error reply is returned, not raised."""
        sent = self.in_flight.popleft()
        if sent is None:
            self.connection.read_response()
            return None
        self.calls -= 1
        stream = sent.submission.stream
        if self.unanswered.get(stream) is sent:
            del self.unanswered[stream]
        try:
            reply = self.connection.read_response()
        except redis.ResponseError as error:
            return sent, error
        self._finish(sent, reply)
        return None

    def _again(self, failed: list[tuple[_Call, redis.ResponseError]]) -> None:
        """Run failed calls again, in order, once their causes are removed."""
        purged: set[str] = set()
        for call, error in failed:
            pod = call.submission.stream.pod
            if str(error).startswith("MODEL_CHANGED"):
                if pod not in purged:
                    self.applier.purge_pod(pod)
                    purged.add(pod)
            elif not (isinstance(error, NoScriptError) or str(error).startswith("OUT_OF_ORDER")):
                raise error
            script_keys = _pod_keys(pod, call.submission.model, call.submission.kind)[0]
            again = self.applier.scripts["apply"]
            self._finish(call, again(keys=script_keys, args=call.args, client=self.applier.client))

    def _finish(self, call: _Call, reply: list[int]) -> None:
        submission = call.submission
        submission.unread -= 1
        if reply[0]:
            self.retired[submission.stream.pod] = submission
        call.reply = reply
        submission.finish_if_complete()
