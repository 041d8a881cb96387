"""Fault switches, from Python and through `POST /admin/fault`: restart (seq reset, cache gone),
drop (a gap on PUB that replay fills), slow publisher."""

import time

import zmq

from kvadmin.ingest.decode import decode_batch, split_frames
from kvadmin.ingest.replay import request_replay
from tests.conftest import http_json
from tests.fleet.conftest import StartFleet, local_config
from tests.waiting import patient

PROMPTS = [list(range(i * 100, i * 100 + 40)) for i in range(1, 9)]


def subscribe(endpoint: str) -> zmq.Socket:
    sub = zmq.Context.instance().socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    sub.setsockopt(zmq.RCVTIMEO, 5000)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.connect(endpoint)
    return sub


def seq_of(sub: zmq.Socket) -> int:
    return split_frames(sub.recv_multipart())[1]


def test_restart_resets_the_seq_and_forgets_the_cache(start_fleet: StartFleet) -> None:
    pod = start_fleet(local_config()).pods[0]
    sub = subscribe(pod.publishers[0].endpoint)
    pod.wait_for_subscribers()
    pod.serve(PROMPTS[0])
    pod.serve(PROMPTS[1])
    status, _ = http_json(f"{pod.config.http_url}/admin/fault", {"action": "restart"})
    assert status == 200
    assert pod.contents() == set()
    _, result = pod.serve(PROMPTS[0])
    assert result.cached_tokens == 0
    assert [seq_of(sub) for _ in range(3)] == [0, 1, 0]
    sub.close()


def test_dropped_batches_leave_a_gap_that_replay_fills(start_fleet: StartFleet) -> None:
    pod = start_fleet(local_config(encoding="vllm-array")).pods[0]
    sub = subscribe(pod.publishers[0].endpoint)
    pod.wait_for_subscribers()
    served = [pod.serve(PROMPTS[0])[1]]
    status, _ = http_json(f"{pod.config.http_url}/admin/fault", {"action": "drop", "count": 2})
    assert status == 200
    served += [pod.serve(prompt)[1] for prompt in PROMPTS[1:4]]
    assert [seq_of(sub), seq_of(sub)] == [0, 3]
    sub.close()
    assert pod.config.replay_endpoint is not None
    replayed = request_replay(zmq.Context.instance(), pod.config.replay_endpoint, start=1)
    assert [r.seq for r in replayed] == [1, 2, 3]
    assert [decode_batch(r.payload).events for r in replayed] == [r.events for r in served[1:]]


def test_a_slow_publisher_spaces_batches_without_slowing_requests(start_fleet: StartFleet) -> None:
    pod = start_fleet(local_config()).pods[0]
    url = pod.config.http_url
    delay = 1.0  # long beside what serving takes, however busy the machine
    assert http_json(f"{url}/admin/fault", {"action": "slow", "delay": delay})[0] == 200
    started = time.monotonic()
    for prompt in PROMPTS[:2]:
        assert http_json(f"{url}/v1/completions", {"prompt": prompt})[0] == 200
    pod.flush()
    assert time.monotonic() - started >= 2 * delay
    http_json(f"{url}/admin/fault", {"action": "slow", "delay": 0})
    started = time.monotonic()
    for prompt in PROMPTS[3:]:
        pod.serve(prompt)
    pod.flush()
    assert time.monotonic() - started < patient(5 * delay)  # not 5 delays


def test_an_unknown_fault_or_rank_is_refused(start_fleet: StartFleet) -> None:
    url = start_fleet(local_config()).pods[0].config.http_url
    assert http_json(f"{url}/admin/fault", {"action": "explode"})[0] == 400
    assert http_json(f"{url}/admin/fault", {"action": "restart", "rank": 3})[0] == 400
    assert http_json(f"{url}/admin/fault", {"action": "drop", "count": 0})[0] == 400
