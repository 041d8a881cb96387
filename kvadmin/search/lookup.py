"""The header's search box: what one string can name, and where each match lives.

A query is tried as every kind of id at once; each kind costs a bounded number of round trips,
never a keyspace scan:

Every index group is looked in (`kvadmin.index.groups`); the decision log is on REDIS_URL.

- a block hash (standardized, decimal or 0x hex): one EXISTS per known model;
- an engine hash (what vLLM and SGLang log: a 64-bit integer in decimal, signed or unsigned,
  or in 0x hex; or digest hex): one HGET of each known pod's streams' engine blocks per form
  (`kvadmin.index.engine_blocks.lookup`; three round trips: the streams, their generations,
  then the entries), which hold it whether or not kthena's mapping keys are kept
  (compatibility.md 2.3). An integer is
  looked up in both its signed and unsigned spelling (SGLang's are signed, vLLM's unsigned);
- a pod or a model: the registry and the index's pod table, exact or as a part of the name;
- a decision id: its first 11 hex digits are the decision's millisecond, so one XRANGE of the
  decision log around that moment finds it;
- a request id: the newest REQUEST_SCAN decisions of the log, matched on the raw entry before
  decoding it (only when no other kind matched exactly). Bounded, and the page says so: a
  miss reading the whole log (10,000 entries) cost 100 to 190 ms of the process's one sync
  thread.

One match: the page jumps there. More: they are listed. None: the page says what was tried.
"""

import json
from dataclasses import dataclass
from urllib.parse import urlencode

import redis
from django.urls import reverse

from kvadmin.engines.models import Engine
from kvadmin.index import engine_blocks
from kvadmin.routing import decisions
from scoring import keys

MAX_QUERY = 300
MAX_LISTED = 50
STD_MAX = 2**63 - 1
DECISION_ID_LENGTH = 19
DECISION_WINDOW_MS = 60_000
"""A decision is logged within this long after its id's millisecond (recording happens right
after scoring; a minute is generous)."""
LOG_PAGE = 200
"""Entries per XRANGE while looking for a decision id (it is near the start)."""
SCAN_PAGE = 1000
"""Entries per XREVRANGE while scanning the log for a request id."""
REQUEST_SCAN = 2000
"""The newest decisions a request-id search reads (two pages)."""


@dataclass(frozen=True, slots=True)
class Match:
    kind: str
    """"block", "engine hash", "pod", "model", "decision", "request"."""
    label: str
    url: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class SearchResult:
    query: str
    matches: list[Match]
    tried: list[str]

    @property
    def jump(self) -> str | None:
        return self.matches[0].url if len(self.matches) == 1 else None


def search(
    client: redis.Redis, query: str, indexes: list[redis.Redis] | None = None
) -> SearchResult:
    """`query` looked up in the decision log on `client` and in each index of `indexes` (one
    per index group; `client`'s alone by default)."""
    query = query.strip()[:MAX_QUERY]
    if not query:
        return SearchResult(query, [], [])
    indexes = indexes or [client]
    pods, models = _known(indexes)
    matches: list[Match] = []
    tried = []
    number = _std_hash(query)
    if number is not None:
        tried.append("a block hash")
        held = set(models.values()).union(*(_index_models(index) for index in indexes))
        for index in indexes:
            matches += _blocks(index, number, sorted(held))
    engine_texts = engine_hash_texts(query)
    if engine_texts:
        tried.append("an engine hash")
        for index in indexes:
            matches += _engine_hashes(index, engine_texts, pods, models)
    tried += ["a pod", "a model"]
    matches += _names(query, pods, models)
    if _is_decision_id(query):
        tried.append("a decision id")
        matches += _decision(client, query)
    exact = [m for m in matches if m.kind not in ("pod", "model") or m.label == query]
    if not exact:  # the log scan is the one costly lookup: only when nothing else is exact
        found, complete = _requests(client, query)
        tried.append("a request id" if complete else f"a request id (the newest {REQUEST_SCAN:,})")
        matches += found
    return SearchResult(query, _unique(matches)[:MAX_LISTED], tried)


def _known(indexes: list[redis.Redis]) -> tuple[dict[str, str], dict[str, str]]:
    """(pod -> kind, pod -> model) of every registered engine and every pod in the indexes."""
    models: dict[str, str] = {}
    kinds: dict[str, str] = {}
    for index in indexes:
        pipe = index.pipeline(transaction=False)
        pipe.hgetall(keys.POD_MODELS_KEY)
        pipe.hgetall(keys.POD_KINDS_KEY)
        held, held_kinds = pipe.execute()
        models |= held
        kinds |= held_kinds
    for pod, model, kind in Engine.objects.values_list("pod", "model", "kind"):
        models[pod], kinds[pod] = model, kind
    return kinds, models


def _index_models(client: redis.Redis) -> set[str]:
    return set(client.hvals(keys.POD_MODELS_KEY))


def _std_hash(query: str) -> int | None:
    text = query.lower()
    try:
        value = int(text, 16) if text.startswith("0x") else int(text) if text.isdigit() else None
    except ValueError:
        return None
    return value if value is not None and 0 <= value <= STD_MAX else None


def engine_hash_texts(query: str) -> list[str]:
    """The mapping keys' texts (`index.events.engine_hash_text`) that what an engine logs may
    stand for: digest hex (32 or 64 digits) as it is; a 64-bit integer, in decimal (signed or
    unsigned) or hex (0x and up to 16 digits, or 16 digits with a letter), as both its signed
    and its unsigned decimal (one value, two spellings: SGLang's keys are signed, vLLM's
    unsigned). Empty: not an engine hash."""
    text = query.lower()
    if len(text) in (32, 64) and _is_hex(text):
        return [text]
    value = _integer(text)
    if value is None or not -(2**63) <= value < 2**64:
        return []
    signed = value - 2**64 if value >= 2**63 else value
    return list(dict.fromkeys((str(value), str(signed), str(signed % 2**64))))


def _integer(text: str) -> int | None:
    digits = text.removeprefix("-")
    if digits.isascii() and digits.isdigit() and len(digits) <= 20:
        return int(text)
    hex_digits = text.removeprefix("0x")
    if hex_digits != text and 0 < len(hex_digits) <= 16 and _is_hex(hex_digits):
        return int(hex_digits, 16)
    if len(text) == 16 and _is_hex(text) and not text.isdigit():
        return int(text, 16)
    return None


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdef" for c in text)


def _blocks(client: redis.Redis, std: int, models: list[str]) -> list[Match]:
    if not models:
        return []
    pipe = client.pipeline(transaction=False)
    for model in models:
        pipe.hlen(keys.block_key(model, std))
    return [
        Match("block", f"block {std}", reverse("block", args=[model, std]), f"{model}, {n} owners")
        for model, n in zip(models, pipe.execute(), strict=True)
        if n
    ]


def _engine_hashes(
    client: redis.Redis, texts: list[str], kinds: dict[str, str], models: dict[str, str]
) -> list[Match]:
    pods = sorted(pod for pod in kinds if kinds[pod] and pod in models)
    if not pods:
        return []
    pipe = client.pipeline(transaction=False)
    for pod in pods:
        pipe.smembers(keys.pod_ranks_key(pod))
    streams = [
        (pod, name) for pod, names in zip(pods, pipe.execute(), strict=True) for name in names
    ]
    asked = [(pod, name, text) for pod, name in streams for text in texts]
    if not asked:
        return []
    found = []
    for (pod, _, text), entry in zip(asked, engine_blocks.lookup(client, asked), strict=True):
        std = entry.std if entry is not None else ""
        if std.isdigit():
            url = reverse("block", args=[models[pod], int(std)])
            found.append(Match("engine hash", f"block {std}", url, f"engine hash {text} of {pod}"))
    return found


def _names(query: str, kinds: dict[str, str], models: dict[str, str]) -> list[Match]:
    """Pods and models named exactly first, then those whose name contains the query
    (case-insensitive)."""
    wanted = query.casefold()
    candidates = [
        Match("pod", pod, reverse("pod", args=[pod]), models.get(pod, ""))
        for pod in sorted(kinds.keys() | models.keys())
    ]
    for model in sorted(set(models.values())):
        pods = sum(1 for m in models.values() if m == model)
        url = f"{reverse('blocks')}?{urlencode({'model': model})}"
        candidates.append(Match("model", model, url, f"{pods} pod{'s' if pods != 1 else ''}"))
    exact = [m for m in candidates if m.label.casefold() == wanted]
    partial = [m for m in candidates if wanted in m.label.casefold() and m not in exact]
    return exact + partial


def _is_decision_id(query: str) -> bool:
    return len(query) == DECISION_ID_LENGTH and all(c in "0123456789abcdef" for c in query)


def _decision(client: redis.Redis, decision_id: str) -> list[Match]:
    """The log from just before the id's millisecond on, a page at a time, until the entry
    or the end of DECISION_WINDOW_MS."""
    millisecond = int(decision_id[:11], 16)
    needle = f'"{decision_id}"'  # under its name of today or of old (`decisions.RENAMED`)
    lower, upper = f"{max(0, millisecond - 1000)}-0", f"{millisecond + DECISION_WINDOW_MS}-0"
    while True:
        entries = client.xrange(keys.DECISIONS_KEY, lower, upper, count=LOG_PAGE)
        hits = [(log_id, fields) for log_id, fields in entries if needle in fields.get("d", "")]
        found = [d for d in decisions.decoded(hits) if d.decision_id == decision_id]
        if found:
            return [_decision_match("decision", d) for d in found]
        if len(entries) < LOG_PAGE:
            return []
        lower = f"({entries[-1][0]}"


def _requests(client: redis.Redis, request_id: str) -> tuple[list[Match], bool]:
    """Decisions whose request id is exactly the query, newest first, among the newest
    REQUEST_SCAN of the log (the raw entry is tested before it is decoded); and whether that
    was the whole log."""
    needle = '"request_id":' + json.dumps(request_id, ensure_ascii=False, separators=(",", ":"))
    found: list[Match] = []
    upper, read = "+", 0
    while len(found) < MAX_LISTED:
        count = min(SCAN_PAGE, REQUEST_SCAN - read)
        entries = client.xrevrange(keys.DECISIONS_KEY, max=upper, count=count)
        read += len(entries)
        hits = [(log_id, fields) for log_id, fields in entries if needle in fields.get("d", "")]
        found += [
            _decision_match("request", d)
            for d in decisions.decoded(hits)
            if d.request_id == request_id
        ]
        if len(entries) < count:
            return found, True
        if read >= REQUEST_SCAN:
            upper = f"({entries[-1][0]}"
            return found, not client.xrevrange(keys.DECISIONS_KEY, max=upper, count=1)
        upper = f"({entries[-1][0]}"
    return found, True


def _decision_match(kind: str, decision: decisions.Decision) -> Match:
    label = f"decision {decision.decision_id}"
    if kind == "request":
        label += f" (request {decision.request_id})"
    detail = f"{decision.model}: chose {decision.chosen or 'no pod'}"
    return Match(kind, label, reverse("decision", args=[decision.log_id]), detail)


def _unique(matches: list[Match]) -> list[Match]:
    seen, out = set(), []
    for match in matches:
        if match.url not in seen:
            seen.add(match.url)
            out.append(match)
    return out
