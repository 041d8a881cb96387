"""The routing-state section of both index readers: on any state in Redis, the Lua reader and
the baseline reader give the same RouteState as a plain reading of the keys, beside the same
walk, and the Lua reader does it in one command. Speculative entries count up to each pod's
reach: the first block past its matched run without one (a later one cannot extend its
match)."""

import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scoring.index import BaselineIndexReader, IndexReader
from scoring.keys import in_flight_key, load_key, queue_key
from scoring.route_state import RawPodState, RouteState, StateRequest
from tests.index import MODEL, write_kthena_index
from tests.scoring.speculative_data import write_speculative

NOW = 1_760_000_000_000
PODS = ["vllm-0.default", "vllm-1.default", "a|b.ns", "ünï.ns"]
WINDOW = 2000
TEXTS = st.one_of(
    st.none(),
    st.integers(-5, 50).map(str),
    st.floats(-1e6, 1e13, allow_nan=False).map(repr),
    st.sampled_from(["", "nan", "inf", "x", str(NOW / 1000), str(NOW)]),
)
OFFSETS = st.integers(-5000, 5000)


@st.composite
def pod_states(draw: st.DrawFn, blocks: list[int]) -> dict:
    return {
        "queue": draw(st.dictionaries(st.sampled_from(["busy_until_ms", "prefill_ms"]), TEXTS)),
        "in_flight": draw(st.dictionaries(st.text(min_size=1, max_size=4), OFFSETS, max_size=6)),
        "speculative": draw(st.dictionaries(st.sampled_from(blocks + [999]), OFFSETS)),
        "load": draw(
            st.dictionaries(
                st.sampled_from(["running", "waiting", "kv_usage", "scraped_at"]), TEXTS
            )
        ),
    }


def write_state(client: redis.Redis, pod: str, state: dict) -> None:
    queue = {field: value for field, value in state["queue"].items() if value is not None}
    if queue:
        client.hset(queue_key(pod), mapping=queue)
    for member, offset in state["in_flight"].items():
        client.zadd(in_flight_key(pod), {member: NOW + offset})
    load = {field: value for field, value in state["load"].items() if value is not None}
    if load:
        client.hset(load_key(pod), mapping=load)


def reached(blocks: list[int], run: int, speculative: dict[int, int]) -> tuple[int, ...]:
    """Positions with a live entry, up to the first block past `run` without one."""
    positions = []
    for i, block in enumerate(blocks):
        if speculative.get(block, 0) > 0:
            positions.append(i)
        elif i >= run:
            break
    return tuple(positions)


def expected_state(blocks: list[int], runs: dict[str, int], states: dict[str, dict]) -> RouteState:
    """The keys read literally, with no code shared with scoring/."""
    pods = {}
    for pod, state in states.items():
        queue = {k: v for k, v in state["queue"].items() if v is not None}
        load = {k: v for k, v in state["load"].items() if v is not None}
        pods[pod] = RawPodState(
            busy_until_ms=queue.get("busy_until_ms"),
            prefill_ms=queue.get("prefill_ms"),
            in_flight=sum(1 for offset in state["in_flight"].values() if offset > -WINDOW),
            running=load.get("running"),
            waiting=load.get("waiting"),
            kv_usage=load.get("kv_usage"),
            scraped_at=load.get("scraped_at"),
            speculative=reached(blocks, runs.get(pod, 0), state["speculative"]),
        )
    return RouteState(NOW, pods)


@settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_both_readers_read_the_routing_state_as_the_keys_say(
    redis_client: redis.Redis, data: st.DataObject
) -> None:
    redis_client.flushdb()
    n_blocks = data.draw(st.integers(0, 8), label="blocks")
    blocks = list(range(10, 10 + n_blocks))
    write_kthena_index(redis_client, {block: {PODS[0]: "1000|GPU"} for block in blocks[:3]})
    pods = data.draw(st.lists(st.sampled_from(PODS), unique=True), label="pods")
    states = {pod: data.draw(pod_states(blocks), label=pod) for pod in pods}
    entries: dict[int, dict[str, float]] = {}
    for pod, state in states.items():
        write_state(redis_client, pod, state)
        for block, offset in state["speculative"].items():
            entries.setdefault(block, {})[pod] = NOW + offset
    write_speculative(redis_client, entries)
    request = StateRequest(MODEL, pods, WINDOW, now_ms=NOW)

    runs = {PODS[0]: min(3, n_blocks)}
    expected = expected_state(blocks, runs, states) if pods else None
    walks = []
    for reader in (BaselineIndexReader(), IndexReader()):
        walk, state = reader.read(redis_client, MODEL, blocks, set(PODS), {}, state=request)
        assert state == expected, type(reader).__name__
        walks.append(walk)
    assert walks[0] == walks[1]


def test_without_a_pinned_clock_both_readers_read_at_redis_time(redis_client) -> None:
    seconds, micros = redis_client.time()
    now = seconds * 1000 + micros // 1000
    write_speculative(redis_client, {11: {PODS[1]: now + 60_000}, 12: {PODS[1]: now - 1}})
    request = StateRequest(MODEL, PODS[:2], WINDOW)
    for reader in (BaselineIndexReader(), IndexReader()):
        _walk, state = reader.read(redis_client, MODEL, [11, 12], None, {}, state=request)
        assert state is not None and 0 <= state.now_ms - now < 5000
        assert state.pods[PODS[1]].speculative == (0,)
        assert state.pods[PODS[0]] == RawPodState()


def test_the_lua_reader_reads_walk_and_state_in_one_command(own_redis, own_client) -> None:
    """MONITOR on a redis-server of its own: what it sees is this test's commands alone."""
    blocks = list(range(20))
    write_kthena_index(own_client, {block: {PODS[0]: "1000|GPU"} for block in blocks})
    request = StateRequest(MODEL, PODS, WINDOW)
    reader = IndexReader()
    reader.read(own_client, MODEL, blocks, set(PODS), {}, state=request)  # loads the script
    watcher = redis.Redis.from_url(own_redis.url, decode_responses=True)
    with watcher.monitor() as monitor:
        walk, state = reader.read(own_client, MODEL, blocks, set(PODS), {}, state=request)
        own_client.echo("read done")
        sent = []
        while (command := monitor.next_command())["command"] != "ECHO read done":
            if command["client_type"] != "lua":
                sent.append(command["command"].split()[0])
    assert sent == ["EVALSHA"]
    assert walk.runs[PODS[0]] == (("GPU", 20),) and state is not None
    assert set(state.pods) == set(PODS)
