"""One tree's scoring service in a process of its own, for bench/score.py: it imports the
kvadmin of the tree named by the TREE environment variable (this one, or a `git archive` of
another commit), so two versions run side by side against the same Redis and database.

Protocol, one JSON document a line: the first line on stdin is the setup (Redis URL, database
path, model, whether to create the database rows); then each line asks for `n` calls of one
case (token ids, policy, record) and is answered with their wall times in ms and the pod
chosen last. Written against `routing.service.score(model, token_ids=..., policy=...,
record=...)`, the one call every version since the policies has.
"""

import json
import os
import sys
import time
from pathlib import Path

TREE = Path(os.environ["TREE"])
sys.path.insert(0, str(TREE))


def main() -> None:
    setup = json.loads(sys.stdin.readline())
    os.environ.update(setup["env"])
    import django

    django.setup()
    if setup["create"]:
        from django.core.management import call_command

        from kvadmin.api.models import ApiToken
        from kvadmin.engines.models import Engine

        call_command("migrate", verbosity=0)
        for i, pod in enumerate(setup["pods"]):
            Engine.objects.create(
                pod=pod, model=setup["model"], events_endpoint=f"tcp://10.0.0.{i}:5557"
            )
        token = ApiToken.issue("bench")[1]
    else:
        token = ""
    from kvadmin.routing import service

    print(json.dumps({"token": token}), flush=True)
    for line in sys.stdin:
        ask = json.loads(line)
        times, chosen = [], None
        for _ in range(ask["n"]):
            started = time.perf_counter()
            decision = service.score(
                setup["model"],
                token_ids=ask["token_ids"],
                policy=ask["policy"],
                record=ask["record"],
            )
            times.append((time.perf_counter() - started) * 1000)
            chosen = decision.chosen
        print(json.dumps({"times": times, "chosen": chosen}), flush=True)


if __name__ == "__main__":
    main()
