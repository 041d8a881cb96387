"""`manage.py check --deploy` is clean with the production settings the README documents (and
finds the TLS settings missing without them)."""

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from tests.waiting import patient

# `check --deploy` in a process of its own reads the session's database (DATABASE_URL).
pytestmark = pytest.mark.database
ROOT = Path(__file__).resolve().parent.parent


def _readme_production_env() -> dict[str, str]:
    """The variables of the README's production block (`NAME=value` lines)."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"## Production\n.*?```sh\n(.*?)```", text, re.S)
    assert block, "README has no Production block"
    pairs = re.findall(r"^(?:export )?([A-Z_]+)=(\S+)", block.group(1), re.M)
    return {name: value.strip("'\"") for name, value in pairs}


def _check_deploy(env: dict[str, str], tmp_path: Path) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=os.environ | {"KVADMIN_VAR_DIR": str(tmp_path)} | env,
        capture_output=True,
        text=True,
        timeout=patient(60),
    )
    return result.stdout + result.stderr


def test_the_documented_production_settings_pass(tmp_path: Path) -> None:
    env = _readme_production_env()
    assert {"SECURE_COOKIES", "SECURE_HSTS_SECONDS", "SECURE_PROXY_SSL_HEADER"} <= set(env)
    env["SECRET_KEY"] = secrets.token_urlsafe(60)  # the README says to generate one
    output = _check_deploy(env, tmp_path)
    assert "System check identified no issues" in output, output


def test_the_laptop_defaults_are_flagged(tmp_path: Path) -> None:
    output = _check_deploy({}, tmp_path)
    assert "security.W004" in output and "security.W012" in output
