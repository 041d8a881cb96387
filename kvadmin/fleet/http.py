"""A simulated pod's HTTP face: a tiny ASGI app with the engine endpoints kvadmin and its clients
call, in vLLM's or SGLang's request and response shapes (compatibility.md 2.6), plus fault switches.
It tokenizes with the pod's tokenizer (`engine_tokenizer`: a real one, or the toy one).

- `POST /tokenize`: `prompt` (SGLang also a list of prompts) or `messages`, `add_special_tokens`,
  `add_generation_prompt`; answers `{"tokens", "count", "max_model_len"}` (+ `token_strs` on vLLM).
- `POST /v1/completions`, `POST /v1/chat/completions`: serve the request against the pod's cache
  and answer OpenAI-style, with the real hit in `usage.prompt_tokens_details.cached_tokens` and a
  `kvadmin` extension giving the hit per medium, the pod and the DP rank that served it. With
  `"stream": true` the answer is server-sent events, a word per chunk over the decode time,
  the usage in a last chunk when `stream_options.include_usage` asks (as vLLM does).
- `POST /reset_prefix_cache` (vLLM) and `POST /flush_cache` (SGLang): clear the cache, publishing
  `AllBlocksCleared`.
- `POST /admin/fault`: `{"action": "restart"}`, `{"action": "drop", "count": n}`,
  `{"action": "slow", "delay": seconds}` (0 turns it off), `{"action": "pause"}` (prefills
  wait, requests line up) and `{"action": "resume"}`, optional `"rank"`;
  `{"action": "slow_metrics", "delay": seconds}` delays every `/metrics` answer,
  `{"action": "drip_metrics", "delay": seconds}` sends it a line every `delay` seconds.
- `GET /metrics`: the engine's Prometheus metrics (`engine_metrics`), in its kind's names.
- `GET /health`, `GET /v1/models`.

With a `time_scale` above 0, completions wait in their rank's FIFO prefill queue first
(`timing`); the answer then also gives `kvadmin.queued_ms` and `kvadmin.prefill_ms`.
"""

import asyncio
import inspect
import json
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import uvicorn

from kvadmin.fleet.engine_metrics import EngineMetrics
from kvadmin.fleet.engine_tokenizer import ChatNotSupported, EngineTokenizer, engine_tokenizer
from kvadmin.fleet.pod import SimPod
from kvadmin.fleet.prompt_window import PromptWindow
from kvadmin.fleet.timing import RankQueue, Served, TimingModel
from kvadmin.fleet.tokenizer import Message, message_text

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


PROMETHEUS_TEXT = b"text/plain; version=0.0.4; charset=utf-8"


class Text(bytes):
    """A handler's answer that is not JSON: Prometheus text."""


class Stream:
    """A handler's answer sent as server-sent events: each of `events` (JSON values) is one
    `data:` line, sent as it comes, then `data: [DONE]`, as OpenAI's streaming answers end."""

    def __init__(self, events: AsyncIterator[Any]) -> None:
        self.events = events


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _messages(body: dict[str, Any]) -> list[Message]:
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise HttpError(400, "`messages` must be a non-empty list")
    try:
        return [Message(str(m["role"]), message_text(m.get("content"))) for m in raw]
    except (KeyError, TypeError, AttributeError):
        raise HttpError(400, "each message needs a `role` and a `content`") from None


def _prompt_tokens(
    tokenizer: EngineTokenizer, body: dict[str, Any], chat: bool, window: PromptWindow | None = None
) -> tuple[list[int], int]:
    """The tokens the pod serves of the request's prompt, and the prompt's token count: all
    of them, but the first `window`'s alone of a text prompt when one is given."""
    if chat:
        try:
            tokens = tokenizer.encode_chat(
                _messages(body),
                add_generation_prompt=bool(body.get("add_generation_prompt", True)),
                add_special_tokens=bool(body.get("add_special_tokens", False)),
            )
        except ChatNotSupported as error:
            raise HttpError(400, f"the chat template cannot render the messages: {error}") from None
        return tokens, len(tokens)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return list(prompt), len(prompt)
    if not isinstance(prompt, str):
        raise HttpError(400, "`prompt` must be a string or a list of token ids")
    add_special_tokens = bool(body.get("add_special_tokens", True))
    if window is not None:
        return window.tokens(prompt, add_special_tokens)
    tokens = tokenizer.encode(prompt, add_special_tokens)
    return tokens, len(tokens)


def _reply_words(token_ids: list[int], count: int) -> str:
    """Deterministic generated text: `count` one-token words chosen by the prompt."""
    words = ("the", "cache", "block", "holds", "prefix", "tokens", "served", "again", "fast")
    seed = sum(token_ids[-8:]) + len(token_ids)
    return " ".join(words[(seed + i * 7) % len(words)] for i in range(count))


class PodApp:
    """The ASGI application of one simulated pod."""

    def __init__(self, pod: SimPod) -> None:
        self.pod = pod
        self.tokenizer = engine_tokenizer(pod.config.tokenizer)
        config = pod.config
        self.window = (
            PromptWindow(self.tokenizer, config.prompt_window) if config.prompt_window else None
        )
        self.metrics = EngineMetrics(config.kind, config.model, config.dp_size)
        self.timing = TimingModel(
            config.time_scale,
            config.decode_seconds,
            config.prefill,
            config.reload_weights,
            config.model,
            config.block_size,
            config.gpu_blocks,
        )
        self.queues = [RankQueue(rank, self.timing, self.metrics) for rank in range(config.dp_size)]
        self.metrics_delay = 0.0
        self.metrics_drip = 0.0
        self.routes: dict[tuple[str, str], Callable[[dict[str, Any]], Any]] = {
            ("POST", "/tokenize"): self.tokenize,
            ("POST", "/v1/completions"): self.completions,
            ("POST", "/v1/chat/completions"): self.chat_completions,
            ("POST", "/reset_prefix_cache"): self.reset_prefix_cache,
            ("POST", "/flush_cache"): self.reset_prefix_cache,
            ("POST", "/admin/fault"): self.fault,
            ("GET", "/metrics"): self.prometheus,
            ("GET", "/health"): lambda body: {},
            ("GET", "/v1/models"): self.models,
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        handler = self.routes.get((scope["method"], scope["path"]))
        try:
            if handler is None:
                raise HttpError(404, f"no route {scope['method']} {scope['path']}")
            body = json.loads(b"".join(chunks) or b"{}")
            if not isinstance(body, dict):
                raise HttpError(400, "the body must be a JSON object")
            payload = handler(body)
            if inspect.isawaitable(payload):
                payload = await payload
            status = 200
        except json.JSONDecodeError as error:
            status, payload = 400, self._error(400, f"invalid JSON: {error}")
        except HttpError as error:
            status, payload = error.status, self._error(error.status, str(error))
        if isinstance(payload, Stream):
            await self._stream(send, payload)
            return
        if isinstance(payload, Text):
            data, content_type = bytes(payload), PROMETHEUS_TEXT
        else:
            data, content_type = json.dumps(payload).encode(), b"application/json"
        headers = [(b"content-type", content_type), (b"content-length", b"%d" % len(data))]
        if isinstance(payload, Text) and self.metrics_drip:
            await self._drip(send, data, content_type)
            return
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": data})

    async def _stream(self, send: Send, stream: Stream) -> None:
        headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        async for event in stream.events:
            data = b"data: " + json.dumps(event).encode() + b"\n\n"
            await send({"type": "http.response.body", "body": data, "more_body": True})
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})

    async def _drip(self, send: Send, data: bytes, content_type: bytes) -> None:
        """A line at a time, `metrics_drip` seconds apart: every read gets something in time,
        only a deadline on the whole exchange stops the client."""
        headers = [(b"content-type", content_type)]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for line in data.splitlines(keepends=True):
            await send({"type": "http.response.body", "body": line, "more_body": True})
            await asyncio.sleep(self.metrics_drip)
        await send({"type": "http.response.body", "body": b""})

    def _error(self, status: int, message: str) -> dict[str, Any]:
        kind = "NotFoundError" if status == 404 else "BadRequestError"
        if self.pod.kind == "vllm":
            return {"error": {"message": message, "type": kind, "param": None, "code": status}}
        return {"object": "error", "message": message, "type": kind, "param": None, "code": status}

    def _check_model(self, body: dict[str, Any]) -> None:
        model = body.get("model")
        if model not in (None, "", self.pod.model):
            raise HttpError(404, f"The model `{model}` does not exist.")

    def tokenize(self, body: dict[str, Any]) -> dict[str, Any]:
        self._check_model(body)
        prompt = body.get("prompt")
        if self.pod.kind == "sglang" and isinstance(prompt, list) and "messages" not in body:
            batch = [
                _prompt_tokens(self.tokenizer, {**body, "prompt": p}, chat=False)[0] for p in prompt
            ]
            return {
                "tokens": batch,
                "count": [len(t) for t in batch],
                "max_model_len": self.pod.max_model_len,
            }
        tokens, _ = _prompt_tokens(self.tokenizer, body, chat="messages" in body)
        response = {"count": len(tokens), "max_model_len": self.pod.max_model_len}
        response["tokens"] = tokens
        if self.pod.kind == "vllm":
            response["token_strs"] = None
        return response

    async def _queue_and_serve(self, tokens: list[int], max_tokens: int) -> Served:
        rank = self.pod.next_rank()
        if not self.timing.time_scale:  # the instant pod: served at once, nothing running
            result = self.pod.serve_on(rank, tokens)
            self.metrics.prefilled(rank, result.prompt_tokens, result.cached_tokens, 0.0)
            self.metrics.generated(rank, max_tokens)
            return Served(rank, result, 0.0, 0.0)
        blocks = self.pod.blocks_of(rank, tokens)
        return await self.queues[rank].serve(self.pod.serve_on, tokens, max_tokens, blocks)

    async def _serve(self, body: dict[str, Any], chat: bool) -> tuple[dict[str, Any], str, int]:
        self._check_model(body)
        tokens, count = _prompt_tokens(self.tokenizer, body, chat, self.window)
        if count >= self.pod.max_model_len:
            raise HttpError(
                400,
                f"This model's maximum context length is {self.pod.max_model_len} tokens. "
                f"However, your request has {count} input tokens.",
            )
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens")) or 16
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise HttpError(400, "`max_tokens` must be a positive integer")
        served = await self._queue_and_serve(tokens, max_tokens)
        result, rank = served.result, served.rank
        usage = {
            "prompt_tokens": count,
            "completion_tokens": max_tokens,
            "total_tokens": count + max_tokens,
            "prompt_tokens_details": {"cached_tokens": result.cached_tokens},
        }
        response = {
            "id": f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}",
            "created": int(time.time()),
            "model": self.pod.model,
            "usage": usage,
            "kvadmin": {
                "pod": self.pod.name,
                "engine": self.pod.kind,
                "rank": rank,
                "cached_tokens_by_medium": result.hit_tokens,
                "queued_ms": round(served.queued_seconds * 1000, 3),
                "prefill_ms": round(served.prefill_seconds * 1000, 3),
            },
        }
        return response, _reply_words(tokens, max_tokens), max_tokens

    async def completions(self, body: dict[str, Any]) -> dict[str, Any] | Stream:
        response, text, _ = await self._serve(body, chat=False)
        if body.get("stream"):
            return Stream(self._events(body, response, text, chat=False))
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": "length"}
        return {"object": "text_completion", **response, "choices": [choice]}

    async def chat_completions(self, body: dict[str, Any]) -> dict[str, Any] | Stream:
        response, text, _ = await self._serve(body, chat=True)
        if body.get("stream"):
            return Stream(self._events(body, response, text, chat=True))
        message = {"role": "assistant", "content": text}
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": "length"}
        return {"object": "chat.completion", **response, "choices": [choice]}

    async def _events(
        self, body: dict[str, Any], response: dict[str, Any], text: str, chat: bool
    ) -> AsyncIterator[dict[str, Any]]:
        """OpenAI's streamed answer: the first word at once (the prefill is over: this is the
        first token), the others spread over the decode time, the last with its
        finish_reason, then, when `stream_options.include_usage` asks, a chunk with no
        choices and the usage (vLLM's and OpenAI's shape; it also carries the `kvadmin`
        extension)."""
        words = text.split(" ")
        gap = self.timing.decode_seconds * self.timing.time_scale / max(len(words), 1)
        head = {
            "id": response["id"],
            "object": "chat.completion.chunk" if chat else "text_completion",
            "created": response["created"],
            "model": response["model"],
        }
        for position, word in enumerate(words):
            if position:
                await asyncio.sleep(gap)
            piece = word if position == 0 else " " + word
            last = position == len(words) - 1
            choice: dict[str, Any] = {"index": 0, "finish_reason": "length" if last else None}
            if chat:
                choice["delta"] = {"content": piece} | ({} if position else {"role": "assistant"})
            else:
                choice |= {"text": piece, "logprobs": None}
            yield {**head, "choices": [choice]}
        options = body.get("stream_options")
        if isinstance(options, dict) and options.get("include_usage"):
            usage = {"usage": response["usage"], "kvadmin": response["kvadmin"]}
            yield {**head, "choices": [], **usage}

    def reset_prefix_cache(self, body: dict[str, Any]) -> dict[str, Any]:
        self.pod.clear()
        return {}

    def fault(self, body: dict[str, Any]) -> dict[str, Any]:
        action, rank = body.get("action"), body.get("rank")
        if rank is not None and not isinstance(rank, int):
            raise HttpError(400, "`rank` must be an integer")
        try:
            if action == "restart":
                self.pod.restart(rank)
            elif action == "drop":
                self.pod.drop(int(body.get("count", 1)), rank)
            elif action == "slow":
                self.pod.slow(float(body.get("delay", 0.0)), rank)
            elif action in ("pause", "resume"):
                for r in self.pod.ranks(rank):
                    if action == "pause":
                        self.queues[r].pause()
                    else:
                        self.queues[r].resume()
            elif action == "slow_metrics":
                delay = float(body.get("delay", 0.0))
                if not 0 <= delay <= 3600:
                    raise ValueError("`delay` must be between 0 and 3600 seconds")
                self.metrics_delay = delay
            elif action == "drip_metrics":
                delay = float(body.get("delay", 0.0))
                if not 0 <= delay <= 60:
                    raise ValueError("`delay` must be between 0 and 60 seconds")
                self.metrics_drip = delay
            else:
                raise HttpError(
                    400,
                    "`action` must be restart, drop, slow, pause, resume, slow_metrics or "
                    "drip_metrics",
                )
        except (TypeError, ValueError) as error:
            raise HttpError(400, str(error)) from None
        return {"ok": True, "action": action}

    async def prometheus(self, body: dict[str, Any]) -> Text:
        if self.metrics_delay:  # an engine too busy to answer its scrapes
            await asyncio.sleep(self.metrics_delay)
        return Text(self.metrics.exposition())

    def models(self, body: dict[str, Any]) -> dict[str, Any]:
        card = {"id": self.pod.model, "object": "model", "owned_by": self.pod.kind}
        return {"object": "list", "data": [card | {"max_model_len": self.pod.max_model_len}]}


class HttpServers:
    """Serves several ASGI apps with uvicorn on one event loop in a background thread.

    Listening sockets are bound in `start()`, in the caller's thread, so a port in use fails
    there with `OSError` instead of inside the loop.
    """

    def __init__(self, apps: Sequence[tuple[Any, str, int]]) -> None:
        self._apps = list(apps)
        self._servers: list[uvicorn.Server] = []
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None

    def start(self, timeout: float = 10.0) -> None:
        sockets = []
        try:
            for _app, host, port in self._apps:
                # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets that say so,
                # and without it every response pays a 40 ms delayed ACK.
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
                sockets.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((host, port))
        except OSError:
            for sock in sockets:
                sock.close()
            raise
        for app, host, port in self._apps:
            config = uvicorn.Config(
                app, host=host, port=port, lifespan="off", access_log=False, log_level="warning"
            )
            self._servers.append(uvicorn.Server(config))
        self._thread = threading.Thread(
            target=self._run, args=(sockets,), name="sim-http", daemon=True
        )
        self._thread.start()
        if not self._ready.wait(timeout) or self._failure:
            self.stop()
            raise RuntimeError(f"simulated pods' HTTP servers did not start: {self._failure}")

    def _run(self, sockets: list[socket.socket]) -> None:
        async def main() -> None:
            tasks = [
                asyncio.create_task(server.serve(sockets=[sock]))
                for server, sock in zip(self._servers, sockets, strict=True)
            ]
            while not all(server.started for server in self._servers):
                if any(task.done() for task in tasks):
                    break
                await asyncio.sleep(0.01)
            self._ready.set()
            await asyncio.gather(*tasks)

        try:
            asyncio.run(main())
        except BaseException as error:  # uvicorn exits through SystemExit on startup failure
            self._failure = error
            self._ready.set()
        finally:
            for sock in sockets:
                sock.close()

    def stop(self, timeout: float = 10.0) -> None:
        for server in self._servers:
            server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
