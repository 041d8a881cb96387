"""Which kthena the index serves (compatibility.md 2.7): the configured value format, how far
the switch to it went, and whether it is the format the configured router version reads right.
The weights page, its export and the dashboard say so."""

from dataclasses import dataclass

from kvadmin.conf import format_disagreement, knob, router_value_format, value_format
from kvadmin.index import value_format as switch
from kvadmin.index.groups import index_groups
from scoring.values import ValueFormat


@dataclass(frozen=True, slots=True)
class Serving:
    configured: ValueFormat
    """INDEX_VALUE_FORMAT: what the writer writes."""
    router_version: str
    """ROUTER_VERSION, as configured."""
    progress: switch.RewriteProgress | None
    """The switch of the values already in the index (None: none ran)."""

    @property
    def switching(self) -> bool:
        """Values of the other format may still be in the index."""
        if self.progress is None:
            return self.configured is not ValueFormat.TIERED
        return not (self.progress.done and self.progress.target_format is self.configured)

    @property
    def kthena(self) -> str:
        """The kthena version the index serves."""
        return self.configured.kthena

    @property
    def disagreement(self) -> str | None:
        """Why the router misreads the index, None while they agree."""
        if router_value_format() is self.configured:
            return None
        return format_disagreement()

    @property
    def percent(self) -> int:
        return self.progress.percent if self.progress and self.switching else 0

    def as_json(self) -> dict[str, object]:
        """For the export: what the index serves, for scripts."""
        return {
            "format": self.configured.value,
            "servesKthena": self.kthena,
            "routerVersion": self.router_version,
            "switching": self.switching,
            "agrees": self.disagreement is None,
        }


def index_serving() -> Serving:
    """The configured formats and the switch's progress: each index group switches on its own,
    and the one furthest behind is shown (one Redis read per group; an outage is the
    caller's, answered as one by kvadmin/unavailable.py)."""
    servings = [
        Serving(value_format(), knob("ROUTER_VERSION"), switch.progress(group.client()))
        for group in index_groups()
    ]
    return next((serving for serving in servings if serving.switching), servings[-1])
