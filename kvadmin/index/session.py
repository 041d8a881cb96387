"""Script calls of the apply script sent ahead of their replies on one connection, and their
results: the pipelined half of the index writer (`kvadmin.index.writer.Applier` encodes the
calls and owns the scripts; `Applier.session` starts a session).
"""

import contextlib
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import redis
from hiredis import pack_command
from redis.exceptions import NoScriptError

from kvadmin.index.engine_blocks import is_legacy_layout
from kvadmin.index.events import UNKNOWN_TAGS_MAX, EventBatch
from kvadmin.index.streams import IndexedStream, StreamId
from scoring import keys
from scoring.weights import MediaPreference

if TYPE_CHECKING:
    from kvadmin.index.writer import Applier

SCRIPT_COUNTERS = (
    "blocks_stored",
    "blocks_removed",
    "clears",
    "unresolved_placeholders",
    "unknown_removals",
    "std_conflicts",
)
"""Per-batch counts the apply script returns, in its order."""


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


@dataclass(slots=True)
class Submission:
    """One `ApplySession.submit`: its script calls and who wants their results."""

    stream: StreamId
    model: str
    kind: str
    preference: MediaPreference
    done: Callable[["ApplyResults"], None] | None
    calls: list["ScriptCall"] = field(default_factory=list)
    unread: int = 0
    """Calls sent whose reply is not read yet."""
    sealed: bool = False
    """Every call is sent."""

    def finish_if_complete(self) -> None:
        if self.sealed and not self.unread and self.done is not None:
            done, self.done = self.done, None
            done(ApplyResults(self.calls))


@dataclass(slots=True)
class ScriptCall:
    """One script call: its arguments, and per batch its seq and the counters Python knows."""

    submission: Submission
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

    def __init__(self, calls: list[ScriptCall]) -> None:
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

    def __init__(self, applier: "Applier", window: int) -> None:
        self.applier = applier
        self.window = window
        self.pool = applier.client.connection_pool
        self.connection = self.pool.get_connection()
        self.in_flight: deque[ScriptCall | None] = deque()
        """Replies to read, in order: a script call's, or None for a command of `send`."""
        self.calls = 0
        """Script calls in `in_flight`."""
        self.unanswered: dict[StreamId, ScriptCall] = {}
        """Per stream, its last script call in `in_flight`."""
        self.retired: dict[str, Submission] = {}
        """Pods whose calls cleared a stream: their retired engine blocks wait to be drained."""
        self.spent = False

    def submit(
        self,
        stream: IndexedStream,
        batches: Sequence[tuple[int, EventBatch]],
        now: float | None = None,
        done: Callable[["ApplyResults"], None] | None = None,
    ) -> None:
        """Send one stream's (seq, batch) pairs, in seq order, as script calls of at most
        about `blocks_per_call` blocks each, encoding the next call while Redis applies
        this one."""
        applier = self.applier
        model, kind = stream.model, stream.kind
        preference = applier.preference()  # the drain after the calls orders media alike
        submission = Submission(stream.id, model, kind, preference, done)
        script_keys, head = applier.script_args(stream.id.pod, model, kind, preference)
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
            for call in applier.encoded_calls(submission, head, batches):
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
        """Send a pipeline's commands after the calls submitted so far, in one write, without
        waiting; an error reply raises when it is read."""
        with self._spending():
            commands = [args for args, _options in pipeline.command_stack]
            self.connection.send_packed_command(self.connection.pack_commands(commands))
            self.in_flight.extend([None] * len(commands))
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
            self.applier.drain(pod, submission.model, submission.kind, submission.preference)

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

    def _read_one(self) -> tuple[ScriptCall, redis.ResponseError] | None:
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

    def _again(self, failed: list[tuple[ScriptCall, redis.ResponseError]]) -> None:
        """Run failed calls again, in order, once their causes are removed."""
        purged: set[str] = set()
        upgraded: set[str] = set()
        for call, error in failed:
            pod = call.submission.stream.pod
            if str(error).startswith("MODEL_CHANGED"):
                if pod not in purged:
                    self.applier.purge_pod(pod)
                    purged.add(pod)
            elif is_legacy_layout(error):
                if pod not in upgraded:
                    self.applier.upgrade_pod(pod)
                    upgraded.add(pod)
            elif not (isinstance(error, NoScriptError) or str(error).startswith("OUT_OF_ORDER")):
                raise error
            submission = call.submission
            script_keys, _args = self.applier.script_args(
                pod, submission.model, submission.kind, submission.preference
            )
            again = self.applier.scripts["apply"]
            self._finish(call, again(self.applier.client, script_keys, call.args))

    def _finish(self, call: ScriptCall, reply: list[int]) -> None:
        submission = call.submission
        submission.unread -= 1
        if reply[0]:
            self.retired[submission.stream.pod] = submission
        call.reply = reply
        submission.finish_if_complete()
