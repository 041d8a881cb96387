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
from collections.abc import Sequence
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


ScriptCall = tuple[LuaScript, redis.Redis, list[Any], list[Any]]
"""A script, the client to run it on, its KEYS and ARGV."""


def call_together(calls: Sequence[ScriptCall]) -> list[Any]:
    """The replies of read-only script calls on different servers, each sent before any reply
    is read, as a pipeline sends its commands: one round trip for them all instead of one
    each (the sync twin of `asyncio.gather` over `call_async`). A NOSCRIPT reply is the script
    loaded and run again alone; a connection that fails (a pooled one dropped by a Redis
    restart) leaves the calls to the clients' own `__call__`, with their retry: a call that
    may have run already runs again, hence read-only scripts only."""
    held: list[tuple[redis.Redis, Any]] = []
    replies: list[Any] = []
    try:
        for script, client, keys, args in calls:
            connection = client.connection_pool.get_connection()
            held.append((client, connection))
            connection.send_command("EVALSHA", script.sha, len(keys), *keys, *args)
        for client, connection in held:
            try:
                replies.append(client.parse_response(connection, "EVALSHA"))
            except redis.ResponseError as error:
                replies.append(error)
    except redis.ConnectionError:
        for _, connection in held:
            connection.disconnect()
        return [script(client, keys, args) for script, client, keys, args in calls]
    except BaseException:
        for _, connection in held:
            connection.disconnect()  # a reply may be left unread on it
        raise
    finally:
        for client, connection in held:
            client.connection_pool.release(connection)
    for n, (script, client, keys, args) in enumerate(calls):
        if isinstance(replies[n], NoScriptError):
            replies[n] = script(client, keys, args)
        elif isinstance(replies[n], redis.ResponseError):
            raise replies[n]
    return replies


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
