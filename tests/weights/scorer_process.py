"""A scoring process apart from the test's: for each line on stdin it scores one fixed walk
(one GPU block then one CPU block, of two) with its active weights and prints a JSON line.

Run with `python -m tests.weights.scorer_process` and the session's environment.
"""

import json
import os
import sys

import django


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kvadmin.settings")
    django.setup()
    from kvadmin.weights.active import active_weights
    from scoring.score import PrefixWalk, score_walk

    walk = PrefixWalk({"p.ns": (("GPU", 1), ("CPU", 1))})
    for _ in sys.stdin:
        active = active_weights()
        score = score_walk(walk, 2, active.weights).scores["p.ns"]
        print(json.dumps({"version": active.version, "score": score}), flush=True)


if __name__ == "__main__":
    main()
