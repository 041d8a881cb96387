"""A simulated pod's Prometheus /metrics: the families real engines expose for their load and
prefill work, vLLM's names on vLLM pods and SGLang's on SGLang pods, on a registry of the pod's
own (`generate_latest` of it is the text exposition format the engines serve).

vLLM (vllm/v1/metrics/loggers.py) labels its series `model_name` and `engine` (the
data-parallel rank); SGLang (sglang/srt/metrics/collector.py) `model_name` and, here, `dp_rank`.
"""

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

PREFILL_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

# Per engine kind, each family's name and help text, as the engines spell them. vLLM counts
# prefix-cache queries and hits in tokens and times prefills; SGLang counts requests and has
# no prefill-time histogram.
GAUGES = {
    "vllm": {
        "running": ("vllm:num_requests_running", "Requests in model execution batches"),
        "waiting": ("vllm:num_requests_waiting", "Requests waiting to be processed"),
        "kv_usage": ("vllm:kv_cache_usage_perc", "KV-cache usage, 1 means 100 percent"),
    },
    "sglang": {
        "running": ("sglang:num_running_reqs", "The number of running requests"),
        "waiting": ("sglang:num_queue_reqs", "Requests in the waiting queue"),
        "kv_usage": ("sglang:token_usage", "The token usage"),
    },
}
COUNTERS = {
    "vllm": {
        "prompt_tokens": ("vllm:prompt_tokens", "Prefill tokens processed"),
        "generation_tokens": ("vllm:generation_tokens", "Generation tokens processed"),
        "queries": ("vllm:prefix_cache_queries", "Prefix cache queries, in tokens"),
        "hits": ("vllm:prefix_cache_hits", "Prefix cache hits, in tokens"),
    },
    "sglang": {
        "prompt_tokens": ("sglang:prompt_tokens", "Number of prefill tokens processed"),
        "generation_tokens": ("sglang:generation_tokens", "Generation tokens processed"),
        "queries": ("sglang:num_requests", "Number of requests processed"),
        "hits": ("sglang:cached_tokens", "Number of cached prompt tokens"),
    },
}


class EngineMetrics:
    def __init__(self, kind: str, model: str, ranks: int) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._model = model
        labels = ("model_name", "engine" if kind == "vllm" else "dp_rank")
        r = self.registry
        self._gauges = {k: Gauge(*named, labels, registry=r) for k, named in GAUGES[kind].items()}
        self._counters = {
            k: Counter(*named, labels, registry=r) for k, named in COUNTERS[kind].items()
        }
        self._prefill_time: Histogram | None = None
        if kind == "vllm":
            self._prefill_time = Histogram(
                "vllm:request_prefill_time_seconds",
                "Time spent in the PREFILL phase of a request",
                labels,
                buckets=PREFILL_BUCKETS,
                registry=r,
            )
        for rank in range(ranks):
            self.set_load(rank, 0, 0, 0.0)

    def _labels(self, rank: int) -> tuple[str, str]:
        return (self._model, str(rank))

    def set_load(self, rank: int, running: int, waiting: int, kv_usage: float) -> None:
        labels = self._labels(rank)
        self._gauges["running"].labels(*labels).set(running)
        self._gauges["waiting"].labels(*labels).set(waiting)
        self._gauges["kv_usage"].labels(*labels).set(min(kv_usage, 1.0))

    def prefilled(self, rank: int, prompt_tokens: int, cached_tokens: int, seconds: float) -> None:
        labels = self._labels(rank)
        self._counters["prompt_tokens"].labels(*labels).inc(prompt_tokens)
        if self._prefill_time is not None:  # vLLM: queries and hits in tokens
            self._counters["queries"].labels(*labels).inc(prompt_tokens)
            self._prefill_time.labels(*labels).observe(seconds)
        else:  # SGLang: requests
            self._counters["queries"].labels(*labels).inc()
        self._counters["hits"].labels(*labels).inc(cached_tokens)

    def generated(self, rank: int, tokens: int) -> None:
        self._counters["generation_tokens"].labels(*self._labels(rank)).inc(tokens)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
