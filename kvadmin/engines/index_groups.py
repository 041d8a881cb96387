"""The index groups checked against the registered models, at every start: a misconfigured
group stops the process with every problem named (`kvadmin.index.groups.startup_problems`)."""

from typing import Any

from django.core.checks import CheckMessage, Error, Tags, register

from kvadmin.engines.models import Engine
from kvadmin.index.groups import startup_problems


def _problems() -> list[str]:
    return startup_problems(Engine.objects.values_list("model", flat=True).distinct())


def require_ready(who: str) -> None:
    """Exit naming every problem, for a process that must not run on a broken index."""
    if problems := _problems():
        raise SystemExit("\n".join(f"{who}: {problem}" for problem in problems))


@register(Tags.database)
def check_index_groups(
    app_configs: Any, databases: Any = None, **kwargs: Any
) -> list[CheckMessage]:
    """Run by `manage.py migrate` (`make run` runs it first) and `check --database default`:
    they reach Redis, so not by every command."""
    if not databases:
        return []
    return [Error(problem, id="kvadmin.E010") for problem in _problems()]
