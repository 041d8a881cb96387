"""The index writer's Lua scripts, laid out as BullMQ lays out its commands: one file per command
in `lua/`, named "{command}-{number of KEYS}.lua" with an Input/Output header, and small
includes in `lua/includes/`, each a function or two, that a script names on a line
`--- @include "name"`. The loader inlines every include once, its own includes first, so
Redis sees one self-contained script per command.
"""

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

LUA = Path(__file__).with_name("lua")
_INCLUDE = re.compile(r'^--- @include "([a-z_]+)"$', re.MULTILINE)


@dataclass(frozen=True, slots=True)
class IndexScript:
    name: str
    keys: int
    """How many KEYS the script takes (the number in its file name)."""
    text: str
    """The script with its includes inlined."""


def _inline(text: str, seen: set[str]) -> str:
    def include(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in seen:
            return ""
        seen.add(name)
        return _inline((LUA / "includes" / f"{name}.lua").read_text(), seen)

    return _INCLUDE.sub(include, text)


@cache
def load(command: str) -> IndexScript:
    """The script of `command`, includes inlined."""
    (path,) = LUA.glob(f"{command}-*.lua")
    keys = int(path.stem.rsplit("-", 1)[1])
    return IndexScript(command, keys, _inline(path.read_text(), set()))
