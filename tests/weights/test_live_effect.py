"""A saved version reaches every other scoring process within one second, without restart:
a plain Python process scoring requests and a real Celery worker."""

import json
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from kvadmin.weights.config import WeightConfig
from kvadmin.weights.tasks import weights_in_use
from kvadmin.weights.versions import current_version, save_version
from tests.conftest import ROOT, stop_process
from tests.waiting import a_second_after, patient, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


class Scorer:
    """The scorer_process subprocess: ask it to score, read what it used."""

    def __init__(self, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.weights.scorer_process"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def ask(self) -> dict:
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write("score\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())


@pytest.fixture
def scorer(subprocess_env, fresh_weights, version_one) -> Iterator[Scorer]:
    """A process of its own that scores with the active weights, shown to use version 1 first."""
    scorer = Scorer(subprocess_env)
    assert scorer.ask() == {"version": 1, "score": 90}, "kthena's defaults: (1 + 0.8) / 2"
    yield scorer
    stop_process(scorer.process)


def test_a_saved_version_reaches_another_process_within_a_second(scorer: Scorer) -> None:
    for version, cpu in ((2, 0.5), (3, 0.2), (4, 0.0)):
        save_version(
            WeightConfig.validated({"cpu": cpu}),
            author="erin",
            reason="a test change",
            base_version=current_version().version,
        )
        a_second_after(time.monotonic())
        assert scorer.ask() == {"version": version, "score": int((1 + cpu) / 2 * 100)}


def test_a_saved_version_reaches_a_celery_worker_within_a_second(
    celery_worker, fresh_weights, version_one
) -> None:
    def worker_version() -> int:
        return weights_in_use.delay().get(timeout=patient(5))["version"]

    wait_until(lambda: worker_version() == 1, what="the worker on version 1")
    save_version(
        WeightConfig.validated({"gpu": 0.9}),
        author="erin",
        reason="a test change",
        base_version=current_version().version,
    )
    a_second_after(time.monotonic())
    assert worker_version() == 2
    assert weights_in_use.delay().get(timeout=patient(5))["weights"]["gpu"] == 0.9
