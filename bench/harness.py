"""What the benchmarks share: percentiles, and Django configured against a benchmark's own
Redis and a throwaway SQLite database."""

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


def configure(redis_url: str, workdir: Path, **knobs: str) -> dict[str, str]:
    """Point this process's settings at `redis_url` and a database in `workdir`, set up
    Django, and return the environment for server subprocesses. `knobs` are extra
    environment variables (KVADMIN_... overrides)."""
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "kvadmin.settings",
            "REDIS_URL": redis_url,
            "DATABASE_URL": f"sqlite://{workdir / 'bench.sqlite3'}",
            "KVADMIN_VAR_DIR": str(workdir),
            "SECRET_KEY": "bench-only-secret-key-bench-only-secret-key",
            "KVADMIN_DEMO": "0",
            "KVADMIN_LOG_LEVEL": "WARNING",
            **knobs,
        }
    )
    import django

    django.setup()
    return os.environ.copy()


def baseline_tree(rev: str, workdir: Path) -> Path:
    """The project as it was at `rev`, exported beside the benchmark's files."""
    tree = workdir / f"baseline-{rev}"
    tree.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree
