"""The portal's webhook form offers exactly the events the API sends (the OpenAPI document
types them as strings, so tsc cannot check the list)."""

from __future__ import annotations

import re
from pathlib import Path

from services.webhooks.events import EVENT_TYPES

PORTAL_LIST = Path(__file__).resolve().parents[3] / "portal" / "src" / "webhooks.ts"


def test_the_portal_offers_the_apis_event_types_in_its_order() -> None:
    source = PORTAL_LIST.read_text()
    listed = re.search(r"export const EVENT_TYPES = \[(.*?)\] as const", source, re.S)
    assert listed is not None, "portal/src/webhooks.ts no longer exports EVENT_TYPES"
    assert tuple(re.findall(r'"([^"]+)"', listed.group(1))) == EVENT_TYPES
