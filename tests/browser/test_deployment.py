"""kvadmin as production deploys it (README, "Production layout"): two web processes, two
Celery workers and one beat against one database and one Redis, with a simulated fleet
publishing, and browsers. What an operator relies on across processes:

1. a tier-weights save through one web process is live in the other's scoring within 1 s;
2. two operators saving at once, in two browsers on the two processes, get one success and
   one 409 with what changed, never a 500;
3. the live feed of either process, in a browser, shows decisions scored on both;
4. two workers handed the garbage-collection task at once run it once;
5. stopping one worker hands its streams to the other, and nothing is lost.

The tests share one deployment's processes (starting them takes 30 to 55 s on a loaded
machine); each test's database is its own, as in any transactional test, and the deployment
is brought back to it before the test (the pods registered, a token, version 1 live in every
process). The test that stops a worker comes last.

`make test-postgres` runs 1 and 2 again on PostgreSQL (marked `postgresql`): they prove what
the database does across processes (select_for_update there, SQLite's one writer here);
3 to 5 prove what Redis does.
"""

import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from celery import Celery

from kvadmin.api.models import ApiToken
from kvadmin.engines.models import Engine
from kvadmin.fleet.fleet import Fleet
from kvadmin.fleet.pod import PodConfig
from kvadmin.index import gc, status
from kvadmin.index.streams import StreamId
from kvadmin.redis_server import RedisServer
from kvadmin.redis_urls import with_db
from scoring.keys import (
    API_CACHE_VERSION_KEY,
    GC_LAST_RUN_KEY,
    REGISTRY_VERSION_KEY,
    WEIGHTS_CONFIG_KEY,
    WEIGHTS_VERSION_KEY,
    stream_lease_key,
)
from tests.browser.conftest import TIMEOUT_MS
from tests.conftest import (
    ROOT,
    STARTUP_SECONDS,
    http_json,
    local_config,
    seed_version_one,
    start_asgi_server,
    start_worker,
    stop_process,
)
from tests.index import MODEL
from tests.waiting import a_second_after, patient, wait_until
from tests.weights.forms import operator_cookie, save_at_once, weights_form

# One worker of `make test`'s runs all of them (pytest-xdist), on one deployment.
pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.xdist_group("deployment"),
]
PROMPT = list(range(1000, 1064))  # four blocks


@dataclass
class Deployment:
    redis: redis.Redis
    webs: list[str]
    workers: list[subprocess.Popen]
    fleet: Fleet
    configs: list[PodConfig]
    broker_url: str
    token: str = ""

    def score(self, web: int, request_id: str) -> dict:
        code, answer = http_json(
            f"{self.webs[web]}/api/v1/score",
            {"model": MODEL, "token_ids": PROMPT, "request_id": request_id},
            self.token,
        )
        assert code == 200, answer
        return answer

    def caught_up(self) -> None:
        """Every stream applied everything its publisher sent so far."""
        self.fleet.flush()
        streams = [
            (StreamId(pod.name, rank), publisher.next_seq - 1)
            for pod in self.fleet.pods
            for rank, publisher in enumerate(pod.publishers)
        ]
        wait_until(
            lambda: all(status.last_seq(self.redis, s) == seq for s, seq in streams),
            timeout=30,
            what="every stream to catch up",
        )

    def as_the_database_says(self) -> None:
        """The test's database (emptied after the test before) brought back to what the
        processes hold: the same pods registered (the workers keep their streams), a token
        of this test, and version 1, live in every process, as after a database restore."""
        seed_version_one()
        for config in self.configs:
            Engine.objects.get_or_create(pod=config.name, defaults=config.engine_fields())
        self.token = ApiToken.issue("gateway", "score decisions:read")[1]
        # What those saves announce, in this deployment's Redis (this process announces in the
        # session's): the web processes reload tokens and engines, the workers the registry.
        self.redis.set(API_CACHE_VERSION_KEY, secrets.token_hex(8))
        self.redis.incr(REGISTRY_VERSION_KEY)
        self.redis.delete(WEIGHTS_VERSION_KEY, WEIGHTS_CONFIG_KEY)  # read from the database
        for web in (0, 1):
            wait_until(
                lambda web=web: (
                    self.score(web, f"ready-{secrets.token_hex(4)}")["weights_version"] == 1
                ),
                what=f"web process {web} to score with version 1",
            )


@pytest.fixture(scope="module")
def deployed(subprocess_env, django_db_blocker, tmp_path_factory) -> Iterator[Deployment]:
    """Two web servers, two workers and beat on a Redis of their own, a simulated vLLM and SGLang
    pod registered, every stream owned by a worker: for the module's tests, one after the
    other (`deployment`)."""
    with django_db_blocker.unblock():  # the pods registered before the workers start
        yield from _deployed(subprocess_env, tmp_path_factory.mktemp("beat"))


@pytest.fixture
def deployment(deployed: Deployment) -> Deployment:
    """The module's deployment, with this test's database (as_the_database_says)."""
    deployed.as_the_database_says()
    return deployed


def _deployed(subprocess_env: dict[str, str], scratch: Path) -> Iterator[Deployment]:
    server = RedisServer().start()
    env = subprocess_env | {"REDIS_URL": server.url, "KVADMIN_LEASE_SECONDS": "3"}
    configs = [local_config("vllm-0.default", model=MODEL),
               local_config("sglang-0.default", "sglang", model=MODEL)]  # fmt: skip
    processes: list[subprocess.Popen] = []
    client = redis.Redis.from_url(server.url, decode_responses=True)
    with Fleet(configs) as fleet:
        try:
            seed_version_one()
            for config in configs:
                Engine.objects.create(**config.engine_fields())
            webs = []
            for _ in range(2):
                process, url = start_asgi_server(env)
                processes.append(process)
                webs.append(url)
            workers = [start_worker(env, f"deployed-{n}") for n in range(2)]
            processes += workers
            beat = [sys.executable, "-m", "celery", "-A", "kvadmin", "beat", "--loglevel=WARNING",
                    f"--schedule={scratch / 'beat-schedule'}"]  # fmt: skip
            processes.append(subprocess.Popen(beat, cwd=ROOT, env=env))
            wait_until(
                lambda: all(client.get(stream_lease_key(c.name, 0)) for c in configs),
                timeout=STARTUP_SECONDS,
                what="every stream owned by a worker",
            )
            fleet.wait_for_subscribers()
            yield Deployment(client, webs, workers, fleet, configs, with_db(server.url, 1))
        finally:
            stop_process(*processes)
            client.close()
            server.stop()


@pytest.mark.postgresql  # what the database does across processes
def test_weights_saved_through_one_web_process_score_in_the_other_within_a_second(
    deployment, django_user_model
) -> None:
    deployment.fleet.pods[0].serve(PROMPT)
    deployment.caught_up()
    before = deployment.score(1, "before")["weights_version"]
    cookie = operator_cookie(django_user_model, "erin")
    [(code, body)] = save_at_once(
        [(deployment.webs[0], cookie, weights_form(("gpu", "1"), ("cpu", "0.5"), reason="r"))]
    )
    assert code == 200, body[:300]
    a_second_after(time.monotonic())
    assert deployment.score(1, "after")["weights_version"] == before + 1


@pytest.mark.postgresql  # what the database does across processes
def test_operators_saving_at_once_in_two_browsers_get_one_success_and_one_409(
    deployment, browser, django_user_model
) -> None:
    pages = []
    for n, name in enumerate(("erin", "bob")):
        context = browser.new_context()
        cookie = operator_cookie(django_user_model, name).partition("=")[2]
        context.add_cookies([{"name": "sessionid", "value": cookie, "url": deployment.webs[n]}])
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(f"{deployment.webs[n]}/weights/")
        page.get_by_label("Weight of cpu", exact=True).fill(f"0.{n + 3}")
        page.get_by_role("button", name="Review and save…").click()
        page.get_by_label("Reason").fill(f"{name}'s change")
        pages.append(page)

    def saved(response) -> bool:
        return "/weights/save" in response.url

    with pages[0].expect_response(saved) as first, pages[1].expect_response(saved) as second:
        for page in pages:  # both posts leave before either answer is looked at
            page.get_by_role("button", name="Confirm: save version 2").click(no_wait_after=True)
    assert sorted([first.value.status, second.value.status]) == [200, 409]
    loser = pages[[first.value.status, second.value.status].index(409)]
    loser.locator(".form-errors", has_text="after you loaded version 1").wait_for()
    for page in pages:
        page.context.close()


def test_the_feed_of_either_process_shows_decisions_scored_on_both(
    deployment, page, session_cookie
) -> None:
    page.context.add_cookies(
        [{"name": "sessionid", "value": session_cookie.partition("=")[2], "url": url}
         for url in deployment.webs]
    )  # fmt: skip
    for web in (0, 1):
        page.goto(f"{deployment.webs[web]}/feed/")
        page.wait_for_selector("#feed-status[data-state=live]")
        for scorer in (0, 1):
            deployment.score(scorer, f"on-{scorer}-seen-{web}")
        for scorer in (0, 1):
            page.wait_for_selector(f'.decision[data-request-id="on-{scorer}-seen-{web}"]')


def test_two_workers_handed_the_gc_task_at_once_run_it_once(deployment) -> None:
    # Not the current app: tasks sent later in this session must still reach its own broker.
    broker = Celery(
        "probe", broker=deployment.broker_url, backend=deployment.broker_url, set_as_current=False
    )
    # A run is due (beat sends the task every minute too: one it sent is handed at once as well).
    deployment.redis.delete(GC_LAST_RUN_KEY)
    before = gc.totals(deployment.redis)["runs"]
    for _ in range(2):
        broker.send_task("kvadmin.ingest.collect_garbage")
    # Each worker runs its tasks in order: once both answered a ping sent after the two GC
    # tasks, both tasks are done, whichever worker took them.
    answered: set[str] = set()

    def both_answered() -> bool:
        answered.add(broker.send_task("kvadmin.ping").get(timeout=patient(10)))
        return len(answered) == 2

    wait_until(both_answered, timeout=STARTUP_SECONDS, what="both workers to answer a ping")
    assert gc.totals(deployment.redis)["runs"] == before + 1
    broker.close()


def test_a_stopped_worker_hands_its_streams_to_the_other_and_nothing_is_lost(
    deployment,
) -> None:
    # Last in the module: the deployment keeps one worker from here on.
    fleet = deployment.fleet
    for n in range(10):
        fleet.pods[n % 2].serve([5000 + 16 * n + k for k in range(48)])
    deployment.caught_up()
    stopping = deployment.workers[0]
    stopping.send_signal(signal.SIGTERM)
    stopping.wait(timeout=patient(30))
    for n in range(10, 30):  # published while the stopped worker's streams change hands
        fleet.pods[n % 2].serve([5000 + 16 * n + k for k in range(48)])
    deployment.caught_up()
    for config in fleet.pods:
        assert deployment.redis.get(stream_lease_key(config.name, 0)).startswith("deployed-1")

    def held(pod: str) -> set[int]:
        return {std for std, _medium in fleet.contents()[pod]}

    for pod in fleet.pods:
        indexed = {
            int(key.rpartition("@")[2])
            for key in deployment.redis.scan_iter("matrix:kv:block:*")
            if deployment.redis.hexists(key, pod.name)
        }
        assert indexed == held(pod.name)
