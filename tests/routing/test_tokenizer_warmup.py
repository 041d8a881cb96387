"""A web process loads the configured tokenizers when it starts, before it serves: its first
tokenized request does not pay for the load. A tokenizer that does not load is logged and the
process starts all the same; the load is bounded in time."""

import time
import urllib.request

import pytest

from kvadmin.engines.models import Engine
from kvadmin.routing import tokenizer_warmup
from tests.conftest import start_asgi_server, stop_process
from tests.waiting import patient, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_each_web_process_loads_the_tokenizers_before_it_serves(
    subprocess_env, deepseek_v4, tmp_path
) -> None:
    Engine.objects.create(
        pod="vllm-0.default", model="m", events_endpoint="tcp://127.0.0.1:9", tokenizer=deepseek_v4
    )
    Engine.objects.create(pod="vllm-1.default", model="n", events_endpoint="tcp://127.0.0.1:9")
    # A path saved before paths were checked: it must not stop the start.
    Engine.objects.filter(pod="vllm-1.default").update(tokenizer="/etc/passwd")
    log = tmp_path / "web.log"
    with log.open("wb") as output:
        env = subprocess_env | {"KVADMIN_WEB_WORKERS": "1"}
        process, url = start_asgi_server(env, log_level="info", output=output)
        try:
            urllib.request.urlopen(f"{url}/healthz", timeout=patient(10)).read()
            text = wait_until(
                lambda: "tokenizers loaded at start" in (found := log.read_text()) and found,
                what="the start's log",
            )
        finally:
            stop_process(process)
    started = text.index("Application startup complete")
    assert text.index(f"tokenizers loaded at start: {deepseek_v4}") < started
    assert text.index("tokenizer /etc/passwd not loaded at start") < started
    assert "root:" not in text and "Traceback" not in text


def test_the_load_stops_at_its_deadline(caplog) -> None:
    assert tokenizer_warmup.load(["/nonexistent/tokenizer.json"], time.monotonic()) == []
    assert "out of time" in caplog.text
