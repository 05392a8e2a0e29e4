"""What the portal knows of the API that the OpenAPI document does not type (so tsc cannot
check it) is the API's own: the webhook events its form offers, the target kinds its copy
form offers."""

from __future__ import annotations

import re
from pathlib import Path

from services.targets.directory import DirectoryTarget
from services.targets.object_store import ObjectStoreTarget
from services.targets.rbd_pool import RbdPoolTarget
from services.webhooks.events import EVENT_TYPES

SRC = Path(__file__).resolve().parents[3] / "portal" / "src"


def _strings(source: str, pattern: str) -> tuple[str, ...]:
    found = re.search(pattern, source, re.S)
    assert found is not None, f"the portal no longer has {pattern!r}"
    return tuple(re.findall(r'"([^"]+)"', found.group(1)))


def test_the_portal_offers_the_apis_event_types_in_its_order() -> None:
    source = (SRC / "webhooks.ts").read_text()
    assert _strings(source, r"export const EVENT_TYPES = \[(.*?)\] as const") == EVENT_TYPES


def test_the_portal_copies_to_the_target_kinds_that_receive_copies() -> None:
    source = (SRC / "copies.ts").read_text()
    offered = set(_strings(source, r"const RECEIVE_COPIES = new Set\(\[(.*?)\]\)"))
    kinds = (RbdPoolTarget, ObjectStoreTarget, DirectoryTarget)
    assert offered == {k.kind for k in kinds if k.receives_copies}
