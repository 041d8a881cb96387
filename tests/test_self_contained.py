"""A plain clone is the whole project: no file reads or cites anything outside the checkout.

Users clone the repository alone, so a path that climbs out of it (a sibling folder, a
developer's home) or a citation of a document they do not have is a bug, wherever it is.
"""

import re
import subprocess
from pathlib import Path

from tests.conftest import ROOT

THIS = Path(__file__).resolve()
# Built from parts so that this file does not match itself.
OUTSIDE = re.compile(
    "|".join(
        [
            r"(?<![\w/])\.\./" + r"(?!\.)\w",  # ../sibling (not a URL's /a/../b)
            r"/ \"" + "shared" + r"\"",  # Path(...) / "shared"
            r"\b" + "SPEC" + r"(\.md| [0-9])",  # a document users do not have
            r"/(work|home|root)" + r"/\w",  # a developer's absolute path
        ]
    )
)
# Third-party files kept as published (front-end libraries, the tests' axe-core).
VENDORED = ("static/vendor/", "tests/browser/vendor/")
CLIMB = re.compile(r"\.parents\[(\d+)\]|((?:\.parent)+)\b")


def project_files() -> list[Path]:
    """Every file git tracks or would track, third-party vendored assets aside."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    return [
        ROOT / name
        for name in listed
        if name and not name.startswith(VENDORED) and (ROOT / name).is_file()
    ]


def text_of(path: Path) -> str | None:
    try:
        return path.read_text()
    except UnicodeDecodeError:
        return None


def climbs_out(path: Path, text: str) -> list[str]:
    """`Path(__file__)` climbs that go above the checkout from where this file sits."""
    depth = len(path.relative_to(ROOT).parts)  # parents[depth - 1] is the checkout itself
    found = []
    for line in text.splitlines():
        if "__file__" not in line:
            continue
        for index, chain in CLIMB.findall(line):
            levels = int(index) + 1 if index else chain.count(".parent")
            if levels > depth:
                found.append(line.strip())
    return found


def test_the_project_has_files_to_check() -> None:
    names = {path.relative_to(ROOT).as_posix() for path in project_files()}
    assert {"Makefile", "tests/conformance/kthena.json", "docs/compatibility.md"} <= names


def test_no_file_refers_outside_the_checkout() -> None:
    offenders = {}
    for path in project_files():
        text = text_of(path)
        if text is None or path == THIS:
            continue
        found = [line.strip() for line in text.splitlines() if OUTSIDE.search(line)]
        if found := found + climbs_out(path, text):
            offenders[str(path.relative_to(ROOT))] = found
    assert not offenders
