"""The index writer's Lua scripts, laid out as BullMQ lays out its commands: one file per command
in `lua/`, named "{command}-{number of KEYS}.lua" with an Input/Output header, and small
includes in `lua/includes/`, each a function or two, that a script names on a line
`--- @include "name"`. The loader inlines every include once, its own includes first, so
Redis sees one self-contained script per command. Each is built and hashed once per process
(`script`) and runs on whichever client calls it.
"""

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from redis.commands.core import Script

from scoring.scripts import inlined

LUA = Path(__file__).with_name("lua")


@dataclass(frozen=True, slots=True)
class IndexScript:
    name: str
    keys: int
    """How many KEYS the script takes (the number in its file name)."""
    text: str
    """The script with its includes inlined."""


@cache
def load(command: str) -> IndexScript:
    """The script of `command`, includes inlined."""
    (path,) = LUA.glob(f"{command}-*.lua")
    keys = int(path.stem.rsplit("-", 1)[1])
    return IndexScript(command, keys, inlined(path.read_text(), LUA / "includes"))


@cache
def script(command: str) -> Script:
    """The redis-py Script of `command`: call it with `client=`."""
    return Script(None, load(command).text.encode())  # type: ignore[arg-type]
