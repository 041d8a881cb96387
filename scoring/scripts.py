"""The scoring library's Lua scripts, laid out as kvadmin/index/scripts.py lays out the index
writer's: one file per script in `lua/` with an Input/Output header, and includes in
`lua/includes/` that a script names on a line `--- @include "name"`, inlined once each, their
own includes first, so Redis sees one self-contained script. Each is built and hashed once per
process (`script`) and runs on whichever client calls it.

A script goes by EVALSHA. When the server does not know it yet (first use, restart, SCRIPT
FLUSH) the reply is NOSCRIPT; the script is then loaded and run again, once. Queued on a
pipeline it is a plain EVALSHA too (a redis-py `Script` in a pipeline sends SCRIPT EXISTS before
every execute(), a second round trip): its caller passes the reply to `finish`.
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
class ScoringScript:
    name: str
    text: str
    """The script with its includes inlined."""
    sha: str

    def __call__(self, client: redis.Redis, keys: list[Any], args: list[Any]) -> Any:
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


@cache
def script(name: str) -> ScoringScript:
    """The script `lua/{name}.lua`, includes inlined."""
    return script_at(LUA / f"{name}.lua")


@cache
def script_at(path: Path) -> ScoringScript:
    """The script in `path` (includes from `lua/includes/`): the same calls for a script kept
    beside the module that runs it."""
    text = inlined(path.read_text(), LUA / "includes")
    return ScoringScript(path.stem, text, sha1(text.encode()).hexdigest())  # noqa: S324 (Redis' id)
