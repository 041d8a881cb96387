"""Degraded choices are counted each, and logged when a reason starts: an overload that
degrades many answers a second logs each reason once, not once per request."""

import logging

from kvadmin.gateway import counters
from kvadmin.gateway.picker import EndpointPicker


def deadline_choices() -> float:
    return (
        counters.registry.get_sample_value("kvadmin_picker_degraded_total", {"reason": "deadline"})
        or 0.0
    )


def test_a_reason_is_logged_when_it_starts_and_every_choice_is_counted(caplog) -> None:
    picker = EndpointPicker()
    before = deadline_choices()
    with caplog.at_level(logging.WARNING, logger="kvadmin.gateway.picker"):
        for n in range(50):
            picker.degraded("deadline", "pod-a", f"request-{n}")
        picker.degraded("busy", "pod-b", "request-50")
    logged = [record.getMessage() for record in caplog.records]
    assert len(logged) == 2, logged
    assert "(deadline)" in logged[0] and "request-0" in logged[0]
    assert "(busy)" in logged[1]
    assert deadline_choices() - before == 50
