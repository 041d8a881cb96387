"""kvadmin's continuous calibration inside the simulation: the same fit
(`kvadmin.weights.fit.fit`, from windows between samples of the pods' prefill counters) and the
same guarded step (`kvadmin.weights.calibration_step.step`) as the beat task, on the
simulation's clock: a sample of every pod's counters every `sample_s` (LOAD_FIT_SAMPLE_SECONDS),
a step every `period_s` (CALIBRATION_PERIOD_SECONDS); the defaults are kvadmin's."""

from kvadmin.weights.calibration_step import step
from kvadmin.weights.fit import DEFAULT_RELOAD_FRACTION, windows
from kvadmin.weights.fit import fit as fit_windows
from scoring.ttft import TtftParameters

SAMPLES_KEPT = 360
"""LOAD_FIT_SAMPLES."""


class Calibration:
    def __init__(self, pods: list[str], sample_s: float = 1.0, period_s: float = 2.0) -> None:
        self.pods = pods
        self.sample_s, self.period_s = sample_s, period_s
        self.samples: dict[str, list[tuple[float, dict[str, float]]]] = {p: [] for p in pods}
        self.sampled_at = self.stepped_at = float("-inf")
        self.steps = 0

    def scraped(self, now: float, counters: list[dict[str, float]]) -> None:
        if now - self.sampled_at < self.sample_s:
            return
        self.sampled_at = now
        for pod, values in zip(self.pods, counters, strict=True):
            kept = self.samples[pod]
            kept.append((now, values))
            del kept[:-SAMPLES_KEPT]

    def stepped(self, now: float, parameters: TtftParameters) -> TtftParameters:
        """The parameters after this moment's step (the same ones when it is not yet time)."""
        if now - self.stepped_at < self.period_s:
            return parameters
        self.stepped_at = now
        by_pod = {pod: windows("vllm", kept) for pod, kept in self.samples.items()}
        by_model = {"sim": {pod: found for pod, found in by_pod.items() if found}}
        moved = step(parameters, fit_windows(parameters, by_model, DEFAULT_RELOAD_FRACTION))
        if moved is None:
            return parameters
        self.steps += 1
        return moved.parameters
