"""deploy/grafana/cairn.json imports into Grafana without edits: it follows the dashboard
JSON model (an import input for the data source, a 24-column grid without overlaps, unique
panel ids and query ids) and queries only series Cairn exports. Its queries run against a
real Prometheus in tests/integration/metrics/test_prometheus_scrape.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from services.db import Database
from tests.support.metric_names import exported, referenced
from tests.support.stack import REPO

DASHBOARD = REPO / "deploy" / "grafana" / "cairn.json"
PANEL_TYPES = {"stat", "timeseries", "table", "gauge", "bargauge", "row", "text"}


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def test_the_dashboard_follows_grafanas_json_model(dashboard: dict[str, Any]) -> None:
    for key, kind in {"title": str, "uid": str, "schemaVersion": int, "version": int,
                      "panels": list, "templating": dict, "time": dict, "__inputs": list}.items():
        assert isinstance(dashboard.get(key), kind), key
    assert dashboard["id"] is None  # Grafana assigns it on import
    assert 0 < len(dashboard["uid"]) <= 40
    inputs = {f"${{{item['name']}}}" for item in dashboard["__inputs"]
              if item["type"] == "datasource" and item["pluginId"] == "prometheus"}
    assert inputs == {"${DS_PROMETHEUS}"}

    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in dashboard["panels"]:
        assert panel["type"] in PANEL_TYPES, panel["type"]
        assert panel["datasource"]["uid"] in inputs, panel["title"]
        pos = panel["gridPos"]
        assert pos["x"] >= 0, panel["title"]
        assert 0 < pos["w"] <= 24 - pos["x"], panel["title"]
        taken = {(x, y) for x in range(pos["x"], pos["x"] + pos["w"])
                 for y in range(pos["y"], pos["y"] + pos["h"])}
        assert not cells & taken, f"{panel['title']} overlaps another panel"
        cells |= taken
        refs = [target["refId"] for target in panel["targets"]]
        assert refs, panel["title"]
        assert len(refs) == len(set(refs)), panel["title"]
        assert all(target["expr"].strip() for target in panel["targets"]), panel["title"]
    for variable in dashboard["templating"]["list"]:
        assert variable["datasource"]["uid"] in inputs, variable["name"]


def test_the_dashboard_queries_only_series_cairn_exports(dashboard: dict[str, Any],
                                                         db: Database) -> None:
    known = exported(db)
    assert "cairn_jobs_finished_total" in known  # the names are read, not assumed
    used = referenced(DASHBOARD.read_text())
    assert used - known == set(), "the dashboard names series Cairn does not export"
    # ...and the alert rules too
    rules = referenced((REPO / "deploy" / "prometheus" / "alerts.yml").read_text())
    assert rules - known == set(), "the alert rules name series Cairn does not export"
