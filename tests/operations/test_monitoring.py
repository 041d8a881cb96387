"""The Grafana dashboard and the Prometheus alert rules in monitoring/ (docs/monitoring.md)
read what kvadmin really serves: every metric name in their queries is a family of a live
/metrics, the rules pass `promtool check rules` and their unit tests (`promtool test rules`:
each alert fires on the series that mean trouble), and the dashboard's queries parse as PromQL.

promtool is Debian's `prometheus` package (`bin/system-deps --monitoring`); without it the
promtool checks are skipped and the name checks still run."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from kvadmin.api.models import ApiToken
from kvadmin.index import gc
from kvadmin.index.writer import Applier
from tests.conftest import ROOT

pytestmark = pytest.mark.django_db

MONITORING = ROOT / "monitoring"
RULES = MONITORING / "alerts.yml"
RULE_TESTS = MONITORING / "alerts.test.yml"
DASHBOARD = MONITORING / "grafana-dashboard.json"
NAME = re.compile(r"\bkvadmin_[a-z0-9_]+\b")
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}
# The dashboard's variables, as a Prometheus query would read them once Grafana filled them in.
GRAFANA = {"$__rate_interval": "5m", "$model": ".*", "$pod": ".*"}
# What the issue asks the rules to cover.
REQUIRED_ALERTS = {
    "KvadminEngineUnreachable",
    "KvadminIngestLagging",
    "KvadminIngestGaps",
    "KvadminIngestLostBatches",
    "KvadminIngestDecodeErrors",
    "KvadminGarbageCollectionStalled",
    "KvadminHitRatioDropped",
    "KvadminEngineLoadStale",
    "KvadminTtftPredictionDrift",
    "KvadminTtftPredictionErrorHigh",
}


@pytest.fixture
def exposed(redis_client) -> set[str]:
    """The sample names a Prometheus scrape of /metrics can see, after one garbage-collection
    run (the last run's families appear only then)."""
    gc.collect_garbage(Applier(redis_client), max_age=60, registered=set)
    _, token = ApiToken.issue("prometheus", "metrics")
    response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200
    return {
        family.name + suffix
        for family in text_string_to_metric_families(response.content.decode())
        for suffix in SUFFIXES.get(family.type, ("",))
    }


def rule_expressions() -> dict[str, str]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return {rule["alert"]: rule["expr"] for group in groups for rule in group["rules"]}


def dashboard_queries() -> dict[str, str]:
    dashboard = json.loads(DASHBOARD.read_text())
    queries = {
        f"{panel['title']} {target['refId']}": target["expr"]
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
    }
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            queries[f"variable {variable['name']}"] = variable["definition"]
    return queries


def test_every_metric_the_rules_and_the_dashboard_read_is_exposed(exposed) -> None:
    queries = rule_expressions() | dashboard_queries()
    unknown = {
        where: sorted(set(NAME.findall(query)) - exposed)
        for where, query in queries.items()
        if set(NAME.findall(query)) - exposed
    }
    assert unknown == {}
    assert all(NAME.search(query) for query in queries.values())


def test_the_rules_cover_what_operators_page_on() -> None:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    rules = [rule for group in groups for rule in group["rules"]]
    assert {rule["alert"] for rule in rules} >= REQUIRED_ALERTS
    for rule in rules:
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}, rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]


def test_the_dashboard_marks_every_weights_version_change() -> None:
    """An operator lines a save, a restore or a calibration step up with hit ratio and TTFT."""
    dashboard = json.loads(DASHBOARD.read_text())
    (annotation,) = dashboard["annotations"]["list"]
    assert NAME.findall(annotation["expr"]) == ["kvadmin_weights_active_version"]
    assert annotation["enable"] and annotation["datasource"]["uid"] == "${datasource}"


def test_every_dashboard_panel_has_a_query_and_the_datasource_variable() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    panels = [panel for panel in dashboard["panels"] if panel["type"] != "row"]
    assert panels and all(panel["targets"] for panel in panels)
    assert {panel["datasource"]["uid"] for panel in panels} == {"${datasource}"}
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))


def _promtool(*args: str | Path) -> subprocess.CompletedProcess:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool missing: bin/system-deps --monitoring installs Debian's prometheus")
    return subprocess.run(
        [promtool, *map(str, args)], capture_output=True, text=True, timeout=60, check=False
    )


def test_promtool_accepts_the_rules() -> None:
    checked = _promtool("check", "rules", RULES)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_each_alert_fires_on_trouble_and_not_on_health() -> None:
    tested = _promtool("test", "rules", RULE_TESTS)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    covered = set(re.findall(r"alertname: (\w+)", RULE_TESTS.read_text()))
    assert covered >= REQUIRED_ALERTS - {"KvadminIngestGaps"}


def test_the_dashboard_queries_parse_as_promql(tmp_path) -> None:
    """promtool parses a recording rule's expression as Prometheus would: one rule per query."""
    rules = []
    for n, query in enumerate(dashboard_queries().values()):
        if query.startswith("label_values("):
            continue  # Grafana's own function, not PromQL
        for variable, value in GRAFANA.items():
            query = query.replace(variable, value)
        rules.append({"record": f"dashboard:query_{n}", "expr": query})
    file = tmp_path / "dashboard-queries.yml"
    file.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    checked = _promtool("check", "rules", file)
    assert checked.returncode == 0, checked.stdout + checked.stderr
