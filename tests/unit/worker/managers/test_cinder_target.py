"""The Cinder side of a restore for Cinder's backup service (Cairn's Cinder backup driver):
the volume Cinder holds (`restoring-backup`) is written over without being taken from
Cinder or given back (Cinder sets its status after the driver returns); one Cinder no
longer holds is refused before a byte is written. Cinder is faked by its answers."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from services.errors import VolumeInUse
from services.status import RestoreMode
from worker.managers.restore import CinderTarget


class Cinder:
    def __init__(self, status: str) -> None:
        self.status = status
        self.actions: list[dict[str, Any]] = []

    def get(self, volume_id: str) -> SimpleNamespace:
        return SimpleNamespace(id=volume_id, project_id="p", status=self.status)

    def action(self, volume_id: str, action: dict[str, Any]) -> None:
        self.actions.append(action)


def target(cinder: Cinder) -> CinderTarget:
    rt = SimpleNamespace(cinder=SimpleNamespace(
        as_service=lambda: cinder, settings=SimpleNamespace(wait_seconds=1)))
    job = SimpleNamespace(restore_cinder_volume_id="vol-1", project_id="p", attempt=1,
                          restore_mode=RestoreMode.CINDER_BACKUP)
    return CinderTarget(rt, job)  # type: ignore[arg-type]


def test_the_volume_cinder_holds_is_neither_taken_nor_given_back() -> None:
    cinder = Cinder("restoring-backup")
    held = target(cinder)
    held.prepare()
    held.finish(bootable=True)
    assert "partly overwritten" in held.undo()
    assert cinder.actions == []  # no os-reserve, no os-reset_status, no os-set_bootable


def test_a_volume_cinder_no_longer_holds_is_refused() -> None:
    cinder = Cinder("available")
    with pytest.raises(VolumeInUse, match="no longer restoring-backup"):
        target(cinder).prepare()
    assert cinder.actions == []
