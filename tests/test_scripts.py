"""Every Redis script of kvadmin is a .lua file of a `lua/` folder, loaded one way
(scoring/scripts.py) and short enough to read: none is written inside Python, none is over
MAX_LINES, and each compiles in a real Redis."""

import re
from pathlib import Path

import pytest

from scoring.scripts import script_at

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = (ROOT / "kvadmin", ROOT / "scoring")
MAX_LINES = 300
LOADER = ROOT / "scoring" / "scripts.py"
AD_HOC = re.compile(
    r"register_script\(|\.eval\(|\.evalsha\(|script_load\(|redis\.call\(|Script\(None"
)

SCRIPTS = sorted(path for package in PACKAGES for path in package.rglob("*.lua"))
TOP_LEVEL = [path for path in SCRIPTS if path.parent.name == "lua"]


def test_no_script_is_written_or_loaded_inside_python() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for package in PACKAGES
        for path in package.rglob("*.py")
        if path != LOADER
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if AD_HOC.search(line)
    ]
    assert found == []


def test_every_script_lives_in_a_lua_folder() -> None:
    assert SCRIPTS
    assert [p for p in SCRIPTS if p.parent.name not in ("lua", "includes")] == []


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_no_script_is_over_the_limit(path: Path) -> None:
    assert len(path.read_text().splitlines()) <= MAX_LINES


@pytest.mark.parametrize("path", TOP_LEVEL, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_script_compiles_in_redis(path: Path, redis_client) -> None:
    script = script_at(path)
    assert redis_client.script_load(script.text) == script.sha
