"""What the run's summaries share about pytest's JUnit XML reports."""

from __future__ import annotations

import xml.etree.ElementTree as ET


def node_id(case: ET.Element) -> str:
    """The pytest node id of a JUnit test case (pytest writes the module as a dotted path)."""
    return f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
