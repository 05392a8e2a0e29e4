"""The series names Cairn exports, from its metric definitions (for checking the dashboard
and the alert rules against them)."""

from __future__ import annotations

import re

from prometheus_client.metrics import MetricWrapperBase

from services.base import utcnow
from services.db import Database
from services.fleet.collector import FleetCollector
from services.metrics import events
from services.scheduler import metrics as scheduler_metrics
from services.settings import Settings

SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}
NAME = re.compile(r"\bcairn_[a-z_]*[a-z]\b")


def exported(db: Database) -> set[str]:
    names: set[str] = set()
    for module in (events, scheduler_metrics):
        for value in vars(module).values():
            if isinstance(value, MetricWrapperBase):
                for family in value.describe():
                    names |= {family.name + suffix for suffix in SUFFIXES[family.type]}
    for family in FleetCollector(db, Settings(auth_strategy="noauth", environment="development"),
                                 utcnow).collect():
        names.add(family.name)
    return names


def referenced(text: str) -> set[str]:
    return set(NAME.findall(text))

