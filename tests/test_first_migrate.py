"""A new install's first `manage.py migrate` (what `make setup` runs on a plain clone) works
on a database with no tables yet: the checks it runs read the database only once they can."""

import os
import subprocess
import sys
from pathlib import Path

from tests.waiting import patient

ROOT = Path(__file__).resolve().parent.parent


def test_the_first_migrate_of_a_new_install_succeeds(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    result = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        env=env | {"KVADMIN_VAR_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=patient(120),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert list(tmp_path.glob("*.sqlite3")), "the new install's database is in its var dir"
