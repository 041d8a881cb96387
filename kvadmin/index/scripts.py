"""The index writer's Lua scripts, laid out as BullMQ lays out its commands: one file per command
in `lua/`, named "{command}-{number of KEYS}.lua" with an Input/Output header, and small
includes in `lua/includes/`, each a function or two, that a script names on a line
`--- @include "name"`. The loader (scoring/scripts.py, which loads every script of kvadmin)
inlines every include once, its own includes first, so Redis sees one self-contained script
per command. Each is built and hashed once per process (`script`) and runs on whichever client
calls it.
"""

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from scoring.scripts import LuaScript, script_at

LUA = Path(__file__).with_name("lua")


@dataclass(frozen=True, slots=True)
class IndexScript:
    name: str
    keys: int
    """How many KEYS the script takes (the number in its file name)."""
    text: str
    """The script with its includes inlined."""


def _path(command: str) -> Path:
    (path,) = LUA.glob(f"{command}-*.lua")
    return path


@cache
def load(command: str) -> IndexScript:
    """The script of `command`, includes inlined."""
    path = _path(command)
    return IndexScript(command, int(path.stem.rsplit("-", 1)[1]), script_at(path).text)


def script(command: str) -> LuaScript:
    """The script of `command`, run by EVALSHA: `script(command)(client, keys, args)`."""
    return script_at(_path(command))
