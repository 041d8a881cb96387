"""Run a simulated fleet of vLLM/SGLang pods, optionally registered and with traffic."""

import logging
import signal
import threading
from argparse import ArgumentParser
from pathlib import Path

import redis
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from kvadmin.api.models import ApiToken
from kvadmin.conf import knob
from kvadmin.engines.models import Engine
from kvadmin.engines.removal import remove_engine
from kvadmin.fleet.fleet import READY_LINE, Fleet, plan_fleet
from kvadmin.fleet.offload import WRITE_POLICIES
from kvadmin.fleet.scoring_router import ScoringApiRouter
from kvadmin.fleet.traffic import RandomRouter, Router, ThroughGateway, TrafficGenerator
from kvadmin.fleet.workload import Workload
from kvadmin.model_tokenizer import bundled
from kvadmin.model_tokenizer.files import TokenizerUnavailable, cached
from kvadmin.redis_clients import index_client
from kvadmin.redis_server import wait_until_ready
from scoring.keys import DEMO_PODS_KEY

logger = logging.getLogger(__name__)
SIMULATOR_TOKEN = "simulator"


class Command(BaseCommand):
    help = "Start N simulated engine pods (ZMQ events + HTTP), optionally with traffic."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--pods", type=int, default=4)
        parser.add_argument("--kind", default="vllm", help="vllm, sglang, or vllm,sglang (mixed)")
        parser.add_argument("--model", default="Qwen/Qwen3-8B")
        parser.add_argument("--base-port", type=int, default=5557)
        parser.add_argument("--http-port", type=int, default=8100)
        parser.add_argument("--dp-size", type=int, default=1)
        parser.add_argument("--gpu-blocks", type=int, default=512)
        parser.add_argument("--cpu-blocks", type=int, default=1024)
        parser.add_argument("--disk-blocks", type=int, default=2048)
        parser.add_argument(
            "--hicache-write-policy",
            choices=WRITE_POLICIES["sglang"],
            default=None,
            help="when SGLang pods copy blocks to host memory (default: SGLang's, "
            "write_through); vLLM pods store every computed block, as its connector does",
        )
        parser.add_argument(
            "--time-scale",
            type=float,
            default=1.0,
            help="wall seconds per second of the pods' prefill-time model (scoring.ttft's "
            "defaults): 1 serves as fast as a real engine would, 0 answers at once",
        )
        parser.add_argument(
            "--decode-seconds",
            type=float,
            default=1.0,
            help="how long a request keeps running, holding KV memory, after its first token",
        )
        parser.add_argument(
            "--max-model-len", type=int, default=32_768, help="the longest prompt served, tokens"
        )
        parser.add_argument(
            "--prompt-window",
            type=int,
            default=0,
            help="a near-instant pod for gateway benchmarks: of a text prompt, tokenize and "
            "cache only the first this many tokens, the count estimated (0: the whole prompt)",
        )
        parser.add_argument("--register", action="store_true", help="register the pods as engines")
        parser.add_argument("--traffic", type=float, default=0.0, help="requests per second")
        parser.add_argument(
            "--requests", type=int, default=None, help="stop after this many requests"
        )
        parser.add_argument(
            "--routing",
            choices=["kvadmin", "gateway", "random"],
            default="kvadmin",
            help="kvadmin: ask the score API (--api) and send to the pod; gateway: send to the "
            "gateway (--gateway), which asks kvadmin's endpoint picker; random",
        )
        parser.add_argument("--api", default="http://127.0.0.1:8000", help="kvadmin's base URL")
        parser.add_argument(
            "--gateway", default="http://127.0.0.1:8080", help="the gateway's base URL (Envoy)"
        )
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument(
            "--tokenizer",
            default="",
            help=f"the model's tokenizer.json (or its directory), or {bundled.NAME!r} for the "
            "bundled DeepSeek V4 tokenizer: the pods tokenize with it and their registration "
            "names it (default: the built-in toy tokenizer)",
        )

    def handle(self, *args, **options) -> None:
        kinds = [k.strip() for k in options["kind"].split(",") if k.strip()]
        tokenizer = self._tokenizer(options["tokenizer"])
        try:
            configs = plan_fleet(
                options["pods"],
                kinds,
                options["base_port"],
                options["http_port"],
                dp_size=options["dp_size"],
                model=options["model"],
                gpu_blocks=options["gpu_blocks"],
                cpu_blocks=options["cpu_blocks"],
                disk_blocks=options["disk_blocks"],
                sglang_write_policy=options["hicache_write_policy"],
                tokenizer=tokenizer,
                time_scale=options["time_scale"],
                decode_seconds=options["decode_seconds"],
                max_model_len=options["max_model_len"],
                prompt_window=options["prompt_window"],
            )
        except ValueError as error:
            raise CommandError(str(error)) from None
        # Registering writes to Redis: one still loading its data after a restart answers
        # LOADING, and the fleet must not die of it.
        wait_until_ready(settings.REDIS_URL, knob("STARTUP_TIMEOUT"), "fleet")
        stop = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())

        with Fleet(configs) as fleet:
            registered = self._register(configs) if options["register"] else []
            for config in configs:
                self.stdout.write(
                    f"{config.name}: events {config.events_endpoint}, "
                    f"replay {config.replay_endpoint}, http {config.http_url}"
                )
            self.stdout.write(f"{READY_LINE} {len(configs)} pods, {options['traffic']} requests/s")
            try:
                if options["traffic"] > 0:
                    router = self._router(options)
                    traffic = TrafficGenerator(
                        fleet.endpoints(), router, Workload(options["model"], seed=options["seed"])
                    )
                    summary = traffic.run(
                        requests=options["requests"], rate=options["traffic"], stop=stop
                    )
                    traffic.close()
                    self.stdout.write(summary.format())
                else:
                    stop.wait()
            finally:
                self._unregister(registered)

    def _tokenizer(self, given: str) -> str:
        """An absolute tokenizer path (the web processes read it too), checked to load."""
        if not given:
            return ""
        if given == bundled.NAME:
            path = bundled.deepseek_v4_tokenizer(settings.VAR_DIR / "tokenizers" / bundled.NAME)
        else:
            path = Path(given).resolve()
        try:
            cached(str(path))
        except TokenizerUnavailable as error:
            raise CommandError(f"--tokenizer: {error}") from None
        return str(path)

    def _register(self, configs) -> list[str]:
        registered = []
        for config in configs:
            fields = config.engine_fields()
            index_client().hset(DEMO_PODS_KEY, config.name, config.dp_size)
            Engine.objects.update_or_create(pod=fields.pop("pod"), defaults=fields)
            registered.append(config.name)
        return registered

    def _unregister(self, pods: list[str]) -> None:
        ApiToken.objects.filter(name=SIMULATOR_TOKEN).delete()
        for pod in pods:
            try:
                remove_engine(pod)
            except redis.RedisError as error:
                # Stopping together with Redis: garbage collection purges unregistered pods.
                logger.warning("%s unregistered; its index entries stay for now: %s", pod, error)

    def _router(self, options) -> Router | ThroughGateway:
        if options["routing"] == "random":
            return RandomRouter(options["seed"])
        if options["routing"] == "gateway":
            return ThroughGateway(options["gateway"])
        ApiToken.objects.filter(name=SIMULATOR_TOKEN).delete()
        _, token = ApiToken.issue(SIMULATOR_TOKEN)
        return ScoringApiRouter(options["api"], token)
