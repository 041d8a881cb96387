"""Under overload the picker's late work stops: a decision past its deadline starts none of
its expensive steps (tokenizing, the script call), a body past its request's budget starts
no decision, and decisions in flight, late ones included, are bounded
(PICKER_MAX_DECISIONS_IN_FLIGHT): beyond it, degraded "busy" choices at once. The engines'
/tokenize is a server of the test that holds each call until told."""

import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kvadmin.gateway.picker import IMPLAUSIBLE_WAIT_SECONDS, budgeted_deadline
from kvadmin.gateway.protocol import DECISION_HEADER
from scoring.keys import DECISIONS_KEY
from tests.gateway.test_gateway_messages import RECEIVED
from tests.index import MODEL
from tests.waiting import patient, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


class HeldTokenizer(ThreadingHTTPServer):
    """An engine's POST /tokenize that answers a call only once `release` is set."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Tokenize)
        self.calls = 0
        self.asked = threading.Event()
        self.release = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Tokenize(BaseHTTPRequestHandler):
    server: HeldTokenizer

    def do_POST(self) -> None:  # noqa: N802  (http.server's name)
        self.rfile.read(int(self.headers["Content-Length"]))
        self.server.calls += 1
        self.server.asked.set()
        self.server.release.wait(patient(60))
        body = json.dumps({"tokens": list(range(40)), "count": 40}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def held_tokenizer() -> Iterator[HeldTokenizer]:
    """The pods' tokenizer: held until the test releases it (released at the end)."""
    server = HeldTokenizer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.release.set()
    server.shutdown()
    server.server_close()


def test_a_decision_past_its_deadline_before_tokenizing_tokenizes_nothing(
    gateway_of, picker_env, held_tokenizer, redis_client
) -> None:
    """A deadline of 0 has passed before any decision's tokenizing thread runs: each request
    is served by a degraded choice, and its late decision stops there, counted, having asked
    no tokenizer and Redis nothing. (The bound in flight is raised from the one a deadline
    of 0 gives: a late decision still ending would make the next request "busy".)"""
    gateway = gateway_of(
        1,
        env=picker_env
        | {
            "KVADMIN_PICKER_DECISION_DEADLINE_SECONDS": "0",
            "KVADMIN_PICKER_MAX_DECISIONS_IN_FLIGHT": "100",
        },
        registered={"http_base_url": held_tokenizer.url},
    )
    picker = gateway.pickers[0]
    for n in range(3):
        status, headers, raw = gateway.post(
            "/v1/completions", {"model": MODEL, "prompt": f"late {n}"}
        )
        assert status == 200, raw
        assert DECISION_HEADER not in headers
    assert picker.counter("kvadmin_picker_degraded", reason="deadline") == 3
    wait_until(
        lambda: picker.counter("kvadmin_picker_late_decisions") == 3,
        what="the late decisions to end",
    )
    assert picker.counter("kvadmin_picker_late_steps_skipped", step="tokenize") == 3
    assert held_tokenizer.calls == 0
    assert redis_client.xlen(DECISIONS_KEY) == 0


def test_beyond_its_decisions_in_flight_the_choice_is_busy_at_once(
    gateway_of, picker_env, held_tokenizer, redis_client
) -> None:
    """One decision in flight at most: while one waits on the tokenizer, the next request is
    answered at once by a degraded choice, "busy", that started no work; once the first is
    decided, decisions are made again."""
    gateway = gateway_of(
        1,
        env=picker_env
        | {"KVADMIN_PICKER_MAX_DECISIONS_IN_FLIGHT": "1", "KVADMIN_TOKENIZE_TIMEOUT": "60"},
        registered={"http_base_url": held_tokenizer.url},
    )
    picker = gateway.pickers[0]
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(gateway.post, "/v1/completions", {"model": MODEL, "prompt": "held"})
        assert held_tokenizer.asked.wait(patient(30)), "the first decision never tokenized"
        status, headers, raw = gateway.post(
            "/v1/completions", {"model": MODEL, "prompt": "while one is in flight"}
        )
        assert status == 200, raw
        assert DECISION_HEADER not in headers
        assert picker.counter("kvadmin_picker_degraded", reason="busy") == 1
        assert picker.counter("kvadmin_picker_requests", answer="degraded") == 1
        assert held_tokenizer.calls == 1  # the busy request tokenized nothing
        held_tokenizer.release.set()
        status, headers, raw = first.result(timeout=patient(30))
    assert status == 200, raw
    assert DECISION_HEADER in headers  # decided, within its deadline
    status, headers, raw = gateway.post("/v1/completions", {"model": MODEL, "prompt": "after"})
    assert status == 200, raw
    assert DECISION_HEADER in headers
    assert picker.counter("kvadmin_picker_degraded", reason="busy") == 1
    wait_until(lambda: redis_client.xlen(DECISIONS_KEY) == 2, what="both decisions logged")


def test_a_body_past_its_requests_budget_is_answered_at_once_and_left_alone(
    gateway_of, picker_env, held_tokenizer, redis_client
) -> None:
    """A body that reaches the picker after its request's budget (here a microsecond from
    the request's start, which every body outlasts) is answered at once with a degraded
    "behind" choice that starts no decision: no tokenizer asked, nothing late, nothing in
    Redis. The picker's stream ends with that answer: it answers one message a request and
    none of the response, and the response reaches the client whole. (Envoy may still send it
    the response's first chunk, when the pod answers before the stream's end reaches Envoy.)"""
    gateway = gateway_of(
        1,
        env=picker_env | {"KVADMIN_PICKER_REQUEST_BUDGET_SECONDS": "1e-6"},
        registered={"http_base_url": held_tokenizer.url},
    )
    picker = gateway.pickers[0]
    for n in range(3):
        status, headers, raw = gateway.post(
            "/v1/completions", {"model": MODEL, "prompt": f"behind {n}", "max_tokens": 4}
        )
        assert status == 200, raw
        assert DECISION_HEADER not in headers
        assert json.loads(raw)["usage"]["completion_tokens"] == 4
    assert picker.counter("kvadmin_picker_degraded", reason="behind") == 3
    assert picker.counter("kvadmin_picker_requests", answer="degraded") == 3
    assert gateway.stat(RECEIVED) == 3
    assert picker.counter("kvadmin_picker_late_decisions") == 0
    assert held_tokenizer.calls == 0
    assert redis_client.xlen(DECISIONS_KEY) == 0


@pytest.mark.parametrize(
    ("waited", "expected"),
    [
        (0.0, 0.05),  # the decision's own deadline comes first
        (0.23, 0.02),  # the budget's end comes first
        (0.25, None),  # spent: "behind"
        (4.0, None),
        (IMPLAUSIBLE_WAIT_SECONDS, 0.05),  # another host's clock behind: no budget
        (3600.0, 0.05),
    ],
)
def test_the_request_budget_bounds_the_deadline_unless_the_start_is_implausible(
    settings, waited, expected
) -> None:
    settings.KVADMIN = {
        "PICKER_DECISION_DEADLINE_SECONDS": 0.05,
        "PICKER_REQUEST_BUDGET_SECONDS": 0.25,
    }
    now = 1000.0
    deadline = budgeted_deadline(now, now - waited)
    if expected is None:
        assert deadline is None
    else:
        assert deadline == pytest.approx(now + expected)
