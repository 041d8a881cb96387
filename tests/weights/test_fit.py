"""Fitting the TTFT parameters from the engines' prefill counters: windows between samples,
the least-squares fit, and the whole path from a real timed pod's /metrics through the real
scraper and Redis to the page's "Fit from engine metrics" button."""

import pytest

from kvadmin.engines.models import Engine
from kvadmin.load.scraper import LoadScraper, ScrapeSettings, Target
from kvadmin.weights.fit import Window, fit, fit_from_engines, screened, windows
from scoring import keys
from scoring.ttft import TtftParameters
from tests.conftest import http_json, local_config
from tests.weights.forms import HTMX, ttft_fields, weights_form

BASE = TtftParameters(first_token_s=0.05, kappa=2.5, decode_slowdown=0.0)


def vllm(at: float, requests: float, seconds: float, prompt: float, hits: float) -> tuple:
    counters = {
        "prefill_seconds_count": requests,
        "prefill_seconds_sum": seconds,
        "prompt_tokens_total": prompt,
        "prefix_cache_hits_total": hits,
        "running": 0.0,
    }
    return at, counters


def test_windows_are_the_differences_between_consecutive_samples() -> None:
    samples = [
        vllm(20, 5, 1.0, 3000, 1000),
        vllm(10, 1, 0.2, 1000, 0),  # out of order: sorted by time
        vllm(30, 2, 0.1, 500, 0),  # the engine restarted: counters went down
        vllm(40, 2, 0.1, 500, 0),  # nothing prefilled
        vllm(50, 4, 0.5, 2500, 500),
    ]
    assert windows("vllm", samples) == [
        Window(requests=4, computed_tokens=1000, prefill_s=0.8, running=0.0, seconds=10),
        Window(requests=2, computed_tokens=1500, prefill_s=0.4, running=0.0, seconds=10),
    ]


def test_sglang_prefill_time_is_time_to_first_token_less_queueing() -> None:
    older = {"ttft_seconds_count": 1, "ttft_seconds_sum": 1.0, "queue_seconds_sum": 0.5,
             "prompt_tokens_total": 100, "cached_tokens_total": 0, "running": 2}  # fmt: skip
    newer = {"ttft_seconds_count": 3, "ttft_seconds_sum": 2.0, "queue_seconds_sum": 0.7,
             "prompt_tokens_total": 900, "cached_tokens_total": 200, "running": 4}  # fmt: skip
    assert windows("sglang", [(1, older), (2, newer)]) == [Window(2, 600, 0.8, 3.0, seconds=1)]
    without_queue = [(1, dict(older, queue_seconds_sum=0)), (2, newer)]
    without_queue[0][1].pop("queue_seconds_sum")
    assert windows("sglang", without_queue) == [], "TTFT alone includes queueing"


def test_lower_tier_hits_are_not_computed_tokens() -> None:
    """vLLM's connector hits and SGLang's host hits are reloads, not fast prefill."""
    older = dict(vllm(0, 0, 0.0, 0, 0)[1], lower_hits_total=0)
    newer = dict(vllm(10, 2, 0.5, 3000, 1000)[1], lower_hits_total=1200)
    assert windows("vllm", [(0, older), (10, newer)]) == [
        Window(2, 800, 0.5, 0.0, lower_hits=1200, seconds=10)
    ]
    older = {"ttft_seconds_count": 0, "ttft_seconds_sum": 0, "queue_seconds_sum": 0,
             "prompt_tokens_total": 0, "cached_tokens_total": 0, "lower_hits_total": 0}  # fmt: skip
    newer = {"ttft_seconds_count": 2, "ttft_seconds_sum": 1, "queue_seconds_sum": 0.5,
             "prompt_tokens_total": 900, "cached_tokens_total": 500,
             "lower_hits_total": 300}  # fmt: skip
    assert windows("sglang", [(0, older), (5, newer)]) == [
        Window(2, 400, 0.5, 0.0, lower_hits=300, seconds=5)
    ]


def exact(
    t0: float, speed: float, tokens_per_request: list[int], lower: int = 0, reload: float = 0.2
) -> list[Window]:
    return [
        Window(2, 2 * u, 2 * (t0 + (u + reload * lower) / speed), 0.0, 2 * lower, seconds=10)
        for u in tokens_per_request
    ]


def test_noise_free_windows_give_back_the_parameters() -> None:
    result = fit(
        BASE,
        {
            "big": {"b0": exact(0.01, 4000, [100, 400]), "b1": exact(0.01, 4000, [900, 1600])},
            "small": {"s0": exact(0.01, 20_000, [50, 500, 5000])},
            "new": {"n0": exact(0.01, 8000, [1000])},  # one window: through the pooled T0
        },
    )
    assert result.first_token_s == pytest.approx(0.01)
    speeds = {m.model: m.tokens_per_s for m in result.models}
    assert speeds == {"big": 4000, "new": 8000, "small": 20_000}
    assert "only 1 window" in next(m.note for m in result.models if m.model == "new")
    assert result.parameters.first_token_s == pytest.approx(0.01)
    assert dict(result.parameters.prefill_tokens_per_s) == speeds
    assert (result.parameters.kappa, result.parameters.decode_slowdown) == (2.5, 0.0), "kept"
    pods = {pod: (t0, speed) for pod, t0, speed in result.parameters.pod_fits}
    assert pods == {"b0": (0.01, 4000), "b1": (0.01, 4000), "n0": (0.01, 8000),
                    "s0": (0.01, 20_000)}  # fmt: skip
    confidence = {m.model: m.confidence for m in result.models}
    assert confidence == {"big": 0.667, "small": 0.5, "new": 0.0}, "every window an inlier"


def test_each_pod_gets_its_own_line() -> None:
    result = fit(
        BASE,
        {
            "m": {
                "fast": exact(0.01, 20_000, [100, 800, 3000]),
                "slow": exact(0.03, 5000, [100, 800, 3000]),
            }
        },  # fmt: skip
    )
    pods = {pod: (t0, speed) for pod, t0, speed in result.parameters.pod_fits}
    assert pods == {"fast": (0.01, 20_000), "slow": (0.03, 5000)}


def test_lower_tier_hits_leave_the_gpu_speed_and_measure_their_reload() -> None:
    found = exact(0.01, 10_000, [200, 1000, 3000, 500], lower=2000, reload=0.35)
    (model,) = fit(BASE, {"m": {"p": found}}, reload=0.35).models
    assert model.tokens_per_s == 10_000
    assert model.reload_fraction == pytest.approx(0.35, abs=0.01)
    # Counted as computed tokens (the old fit), the reloads look like fast prefill.
    as_computed = [Window(w.requests, w.computed_tokens + w.lower_hits, w.prefill_s, 0.0,
                          seconds=10) for w in found]  # fmt: skip
    (naive,) = fit(BASE, {"m": {"p": as_computed}}).models
    assert naive.tokens_per_s is None or naive.tokens_per_s > 10_000


def test_outlying_windows_do_not_move_the_line() -> None:
    found = exact(0.02, 8000, [100, 300, 600, 1000, 1500, 2100, 2800])
    found[3] = Window(2, 2000, 40.0, 0.0, seconds=10)  # one wild window (a stall, a GC)
    (model,) = fit(BASE, {"m": {"p": found}}).models
    assert model.tokens_per_s == pytest.approx(8000, rel=0.02)
    assert model.intercept_s == pytest.approx(0.02, abs=0.002)
    assert model.confidence < 1.0, "the outlier lowers the confidence"


def test_a_hostile_engine_of_another_model_moves_no_one_elses_parameters() -> None:
    """Issue 34 item 7: self-reported request counts weigh nothing, implausible windows are
    refused, and the pooled T0 is each model's own vote."""
    honest = {"a": {"a0": exact(0.015, 10_000, [100, 900, 3000])},
              "b": {"b0": exact(0.015, 5000, [200, 700, 2500]),
                    "b1": exact(0.015, 5000, [300, 800, 1200])}}  # fmt: skip
    alone = fit(BASE, honest)
    for claimed_requests in (2, 2e6):  # a plausible and an absurd request count
        hostile = [Window(claimed_requests, claimed_requests * u, claimed_requests * 5.0, 0.0,
                          seconds=10) for u in (100, 900, 3000)]  # fmt: skip
        attacked = fit(BASE, {**honest, "evil": {"e0": hostile}})
        assert attacked.first_token_s == alone.first_token_s == pytest.approx(0.015)
        for model in ("a", "b"):
            before = next(m for m in alone.models if m.model == model)
            after = next(m for m in attacked.models if m.model == model)
            assert (after.tokens_per_s, after.intercept_s) == (
                before.tokens_per_s,
                before.intercept_s,
            )
        own = {p: f for p, *f in attacked.parameters.pod_fits}
        assert {p: f for p, *f in alone.parameters.pod_fits}.items() <= own.items()


def test_implausible_self_reported_rates_are_refused() -> None:
    samples = [vllm(0, 0, 0, 0, 0), vllm(10, 5, 1.0, 3000, 0),
               vllm(20, 5 + 10**9, 1.0 + 5 * 10**9, 6000, 0)]  # fmt: skip
    found, refused = screened("vllm", samples)
    assert (len(found), refused) == (1, 1)


def test_what_cannot_be_fitted_is_said_and_left_alone() -> None:
    flat = [Window(1, u, 0.02, 0.0, seconds=10) for u in (100, 200, 300)]  # time does not grow
    cached = [Window(1, 0, 0.02, 0.0, seconds=10)] * 3
    base = TtftParameters(prefill_tokens_per_s={"flat": 1234.0})
    result = fit(base, {"flat": {"f": flat}, "cached": {"c": cached}})
    assert not result.fitted
    notes = {m.model: m.note for m in result.models}
    assert notes == {
        "cached": "every prompt token was cached: nothing to time",
        "flat": "the prefill time does not grow with the tokens computed",
    }
    assert result.parameters.prefill_tokens_per_s == (("flat", 1234.0),)
    assert result.parameters.pod_fits == ()


def scrape_after(scraper: LoadScraper, redis_client, pod: str, requests: list[int]) -> None:
    """Send one request per prompt length, then take one sample."""
    for n, length in enumerate(requests):
        prompt = [length * 100 + n * 7 + i for i in range(length)]
        status, _ = http_json(f"{scraper.load_targets()[0].base_url}/v1/completions",
                              {"prompt": prompt, "max_tokens": 1})  # fmt: skip
        assert status == 200
    redis_client.delete(keys.load_lock_key(pod))
    assert [o.reason for o in scraper.tick()] == ["ok"]


@pytest.mark.django_db
def test_a_timed_pods_counters_fit_its_prefill_model(
    redis_client, start_fleet, client, editor
) -> None:
    truth = TtftParameters(first_token_s=0.004, default_prefill_tokens_per_s=50_000,
                           decode_slowdown=0.0)  # fmt: skip
    pod = "vllm-0.default"
    fleet = start_fleet(
        local_config(pod, time_scale=1.0, prefill=truth, decode_seconds=0.0, gpu_blocks=4096)
    )
    config = fleet.configs[0]
    Engine.objects.create(
        pod=pod, model=config.model, kind="vllm", events_endpoint="tcp://127.0.0.1:1",
        http_base_url=config.http_url,
    )  # fmt: skip
    settings = ScrapeSettings(timeout=2.0, threads=1, sample_every=0.0, samples=10)
    target = Target(pod, "vllm", config.http_url)
    scraper = LoadScraper(redis_client, lambda: [target], lambda: 1, "w1", settings)
    for length in (64, 256, 512, 1024, 2048):  # the first sample is the baseline
        scrape_after(scraper, redis_client, pod, [length] * 2)
    assert redis_client.llen(keys.load_fit_samples_key(pod)) == 5

    fitted = fit_from_engines(redis_client, [(pod, config.model, "vllm")], BASE)
    (model,) = fitted.models
    assert (model.windows, model.requests) == (4, 8)
    assert model.tokens_per_s == pytest.approx(50_000, rel=0.01)
    assert fitted.first_token_s == pytest.approx(0.004, abs=0.0002)

    # The page's button puts them in the editor, unsaved.
    client.force_login(editor)
    form = weights_form(("gpu", "1"), **ttft_fields(kappa="2"))
    html = client.post("/weights/fit/", form, **HTMX).content.decode()
    assert html.lstrip().startswith('<div id="editor">')
    assert 'id="fit-summary"' in html and "put in the draft" in html
    assert 'name="ttft-first_token_s" value="0.004"' in html
    assert f'value="{config.model}"' in html and 'value="50000"' in html
    assert 'name="ttft-kappa" value="2"' in html, "kappa is not in the counters: kept"


@pytest.mark.django_db
def test_without_samples_the_button_says_so_and_changes_nothing(
    fresh_weights, client, editor
) -> None:
    Engine.objects.create(
        pod="vllm-0.default", model="m", kind="vllm", events_endpoint="tcp://127.0.0.1:1"
    )
    client.force_login(editor)
    form = weights_form(("gpu", "1"), **ttft_fields(first_token_s="0.02"))
    html = client.post("/weights/fit/", form, **HTMX).content.decode()
    assert "Nothing could be fitted yet" in html
    assert "vllm-0.default: fewer than two samples" in html
    assert 'name="ttft-first_token_s" value="0.02"' in html
