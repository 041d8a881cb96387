"""Every Redis script of kvadmin, loaded one way. A package keeps its scripts in its `lua/`
folder, one file per script with an Input/Output header, and includes in `lua/includes/` that
a script names on a line `--- @include "name"`, inlined once each, their own includes first,
so Redis sees one self-contained script (kvadmin/index/scripts.py lays out the index writer's
the same way). Each is built and hashed once per process (`script`, `package_script`) and
runs on whichever client calls it.

A script goes by EVALSHA. When the server does not know it yet (first use, restart, SCRIPT
FLUSH) the reply is NOSCRIPT; the script is then loaded and run again, once. Queued on a
pipeline it is a plain EVALSHA too (a redis-py `Script` in a pipeline sends SCRIPT EXISTS before
every execute(), a second round trip): its caller passes the reply to `finish`. A pipeline
handed to a plain call, where NOSCRIPT would come too late to load and retry, gets an EVAL of
the text (Redis caches the script under the same hash).
"""

import re
from dataclasses import dataclass
from functools import cache
from hashlib import sha1
from pathlib import Path
from typing import Any

import redis
import redis.asyncio
from redis.asyncio.client import Pipeline as AsyncPipeline
from redis.client import Pipeline
from redis.exceptions import NoScriptError

LUA = Path(__file__).with_name("lua")
_INCLUDE = re.compile(r'^--- @include "([a-z_]+)"$', re.MULTILINE)


@dataclass(frozen=True, slots=True)
class LuaScript:
    name: str
    text: str
    """The script with its includes inlined."""
    sha: str

    def __call__(
        self, client: redis.Redis | Pipeline | AsyncPipeline, keys: list[Any], args: list[Any]
    ) -> Any:
        if isinstance(client, Pipeline | AsyncPipeline):
            return client.execute_command("EVAL", self.text, len(keys), *keys, *args)
        try:
            return client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            client.script_load(self.text)
            return client.evalsha(self.sha, len(keys), *keys, *args)

    async def call_async(
        self, client: redis.asyncio.Redis, keys: list[Any], args: list[Any]
    ) -> Any:
        """`self(...)` through an asyncio client."""
        try:
            return await client.evalsha(self.sha, len(keys), *keys, *args)  # type: ignore[misc]
        except NoScriptError:
            await client.script_load(self.text)
            return await client.evalsha(self.sha, len(keys), *keys, *args)  # type: ignore[misc]

    def queue(self, pipeline: Pipeline | AsyncPipeline, keys: list[Any], args: list[Any]) -> None:
        """Queue the script on `pipeline` (run it with raise_on_error=False; `finish` its
        reply)."""
        pipeline.execute_command("EVALSHA", self.sha, len(keys), *keys, *args)

    def finish(self, client: redis.Redis, reply: Any, keys: list[Any], args: list[Any]) -> Any:
        """The pipeline's `reply` of `queue`, the script run alone when it was NOSCRIPT."""
        return self(client, keys, args) if isinstance(reply, NoScriptError) else reply

    async def finish_async(
        self, client: redis.asyncio.Redis, reply: Any, keys: list[Any], args: list[Any]
    ) -> Any:
        if isinstance(reply, NoScriptError):
            return await self.call_async(client, keys, args)
        return reply


def inlined(text: str, includes: Path, seen: set[str] | None = None) -> str:
    """`text` with each include (`--- @include "name"`: `includes`/name.lua) inlined once,
    its own includes first."""
    seen = set() if seen is None else seen

    def include(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in seen:
            return ""
        seen.add(name)
        return inlined((includes / f"{name}.lua").read_text(), includes, seen)

    return _INCLUDE.sub(include, text)


def script(name: str) -> LuaScript:
    """The scoring library's script `lua/{name}.lua`."""
    return script_at(LUA / f"{name}.lua")


def package_script(module_file: str, name: str) -> LuaScript:
    """The script `lua/{name}.lua` of the package of `module_file` (a module's `__file__`)."""
    return script_at(Path(module_file).with_name("lua") / f"{name}.lua")


@cache
def script_at(path: Path) -> LuaScript:
    """The script in `path`, its includes from the `includes/` folder beside it."""
    text = inlined(path.read_text(), path.parent / "includes")
    return LuaScript(path.stem, text, sha1(text.encode()).hexdigest())  # noqa: S324 (Redis' id)
