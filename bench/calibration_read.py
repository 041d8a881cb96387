"""What one calibration run's evidence costs (issue 33 item 1): the CPU of `evidence_fit` (read
the delivered outcomes, fit them) per run, in this process and in redis-server, with the same
evidence for this tree and a baseline revision, in the same run.

Each round starts one process per tree (this tree, then `git archive` of `--baseline`, then
the other way round next round), each with its own redis-server and SQLite database: 8 vLLM
engines, a decision log filled with `--backlog` routed requests and their timed outcomes
(written by the tree's own `decisions.append` and `outcomes.record`, as gateways leave them),
then `--runs` runs, each after `--arrivals` more outcomes (a fleet at 100 requests/s between
two runs of a 2 s beat). Printed: the median CPU ms per run of each tree (process and Redis),
their ratio, and the load average.

Run: .venv/bin/python bench/calibration_read.py [--baseline main] [--rounds 3] [--runs 20]
     [--backlog 10000] [--arrivals 200]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PODS = 8
REQUESTERS = ("gateway", "picker")


def child(tree: Path, backlog: int, arrivals: int, runs: int) -> dict[str, list[float]]:
    """One tree's runs: CPU ms per run (this process, redis-server)."""
    sys.path.insert(0, str(tree))
    from bench.harness import configure
    from kvadmin.redis_server import RedisServer

    with RedisServer() as server, tempfile.TemporaryDirectory() as workdir:
        configure(server.url, Path(workdir))
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        from kvadmin.engines.models import Engine
        from kvadmin.redis_clients import index_client
        from kvadmin.weights.evidence import evidence_fit
        from kvadmin.weights.versions import current_version
        from tests.routing.delivered import routed

        pods = [f"vllm-{n}" for n in range(PODS)]
        for pod in pods:
            Engine.objects.create(pod=pod, model="m", kind="vllm",
                                  events_endpoint="tcp://127.0.0.1:1")  # fmt: skip
        client = index_client()
        sent = 0

        def arrive(count: int) -> None:
            nonlocal sent
            for _ in range(count):
                tokens = 200 + 150 * (sent % 7)
                routed(client, pods[sent % PODS], prompt=tokens, ttft_s=0.03 + tokens / 4000,
                       predicted_s=0.05, requester=REQUESTERS[sent % 2])  # fmt: skip
                sent += 1

        arrive(backlog)
        config = current_version().weight_config
        for _ in range(backlog // 2000 + 1):  # this tree folds the backlog, 2,000 a run
            evidence_fit(client, config)
        own, redis_cpu = [], []
        for _ in range(runs):
            arrive(arrivals)
            before, started = _redis_cpu(client), time.process_time()
            evidence_fit(client, config)
            own.append((time.process_time() - started) * 1000)
            redis_cpu.append((_redis_cpu(client) - before) * 1000)
        return {"own": own, "redis": redis_cpu}


def _redis_cpu(client) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def run_child(tree: Path, args: argparse.Namespace) -> dict[str, list[float]]:
    command = [sys.executable, __file__, "--child", str(tree), "--backlog", str(args.backlog),
               "--arrivals", str(args.arrivals), "--runs", str(args.runs)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(command, capture_output=True, text=True, cwd=tree, env=env)
    if done.returncode:
        raise SystemExit(f"{tree} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", default="main")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--backlog", type=int, default=10_000)
    parser.add_argument("--arrivals", type=int, default=200)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.backlog, args.arrivals, args.runs)))
        return
    sys.path.insert(0, str(ROOT))
    from bench.harness import baseline_tree

    with tempfile.TemporaryDirectory() as workdir:
        baseline = baseline_tree(args.baseline, Path(workdir))
        trees = {"this tree": ROOT, f"@{args.baseline}": baseline}
        found = {name: {"own": [], "redis": []} for name in trees}
        for round_ in range(args.rounds):
            order = list(trees) if round_ % 2 == 0 else list(reversed(trees))
            for name in order:
                for part, values in run_child(trees[name], args).items():
                    found[name][part].append(statistics.median(values))
        print(f"{args.backlog:,} outcomes logged, {args.arrivals} new per run, {PODS} pods, "
              f"{args.runs} runs x {args.rounds} rounds; load average "
              f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")  # fmt: skip
        for name, parts in found.items():
            own, redis_ms = statistics.median(parts["own"]), statistics.median(parts["redis"])
            print(f"  {name:>12}: {own:7.2f} ms CPU per run, redis-server {redis_ms:6.2f} ms "
                  f"(round medians {', '.join(f'{v:.2f}' for v in parts['own'])})")  # fmt: skip
        new, old = (statistics.median(found[name]["own"]) for name in trees)
        new_r, old_r = (statistics.median(found[name]["redis"]) for name in trees)
        print(f"  ratio this/baseline: process {new / old:.3f}, redis-server {new_r / old_r:.3f}")


if __name__ == "__main__":
    main()
