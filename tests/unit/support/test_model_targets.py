"""The data-path model's targets (tests/support/model_targets.py), the parts that need no
server: which kind a seed draws, that the main generator draws alike on every kind, what
Cairn must answer for a copy or an instant restore (from the targets' capabilities, a
fourth kind's too), and how the model looks at a chunk target's manifests (a directory
on tmp_path)."""

from __future__ import annotations

import random
import uuid
from pathlib import Path
from typing import ClassVar

import pytest

from services import targets
from services.settings import Settings
from services.storage.object_layout import manifest_key
from services.targets.directory import DirectoryTarget
from tests.support.model_targets import (
    DEFAULT_TARGETS,
    CaseTargets,
    Manifests,
    RbdSnapshots,
    case_kind,
    copy_answer,
    instant_answer,
    layout_of,
    next_target,
    pair,
)

S3 = {"endpoint": "http://127.0.0.1:1", "bucket": "b", "credentials_file": "/nonexistent"}


def _settings(directory: Path) -> Settings:
    """The stacks' targets, as tests/support/stack.py configures them."""
    return Settings(auth_strategy="noauth", environment="development",
                    clusters={"ceph-a": {"conf": "/etc/ceph/a.conf"},
                              "ceph-b": {"conf": "/etc/ceph/b.conf"}},
                    backup_targets={"local": {"cluster": "ceph-a", "pool": "backups"},
                                    "offsite": {"cluster": "ceph-b", "pool": "backups"},
                                    "limited": {"cluster": "ceph-a", "pool": "backups"}},
                    object_targets={"s3": S3},
                    directory_targets={"dir": {"path": str(directory)}})


def test_any_run_of_as_many_seeds_as_kinds_passes_every_kind_once() -> None:
    kinds = ["s3", "rbd", "directory"]
    for first in range(20261123, 20261123 + 30):
        assert {case_kind(seed, kinds) for seed in range(first, first + 3)} == set(kinds)
    # make test's cases: the three on SQLite are one of each; the seed that alone found an
    # incremental keeping an emptied object's old data still runs on RBD.
    assert [case_kind(seed, kinds) for seed in range(20261123, 20261126)] == [
        "s3", "directory", "rbd"]
    assert case_kind(20261134, kinds) == "rbd"
    assert {case_kind(seed, [*kinds, "fourth"]) for seed in range(7, 11)} == {*kinds, "fourth"}
    assert {case_kind(seed, ["rbd", "rbd"]) for seed in range(10)} == {"rbd"}


def test_a_seed_makes_the_same_draws_on_every_kind_and_on_rbd_those_it_made_before() -> None:
    def before(rng: random.Random, last: str) -> str:
        # The model's draw when it knew only the RBD targets local and offsite.
        return last if last and rng.random() < 0.75 else rng.choice(sorted(
            {"local": ("ceph-a", "backups"), "offsite": ("ceph-b", "backups")}))

    for seed in range(200):
        old, rbd, chunks = random.Random(seed), random.Random(seed), random.Random(seed)
        was = on_rbd = on_chunks = ""
        for _ in range(6):
            was = before(old, was)
            on_rbd = next_target(rbd, on_rbd, ("local", "offsite"))
            on_chunks = next_target(chunks, on_chunks, pair(["s3"]))
            assert on_rbd == was
            assert on_chunks == "s3"
        assert old.getstate() == rbd.getstate() == chunks.getstate()


def test_a_case_backs_up_to_two_targets_of_its_kind_or_its_one_twice(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    drawn = {case.kind: case for case in (CaseTargets.draw(settings, DEFAULT_TARGETS, seed)
                                          for seed in range(3))}
    assert {kind: case.pair for kind, case in drawn.items()} == {
        "rbd": ("local", "offsite"), "s3": ("s3", "s3"), "directory": ("dir", "dir")}
    assert set(drawn["rbd"].every) == {"local", "offsite", "s3", "dir"}  # not `limited`
    assert pair(["c", "a", "b"]) == ("a", "b")
    without_s3 = settings.model_copy(update={"object_targets": {}})
    with pytest.raises(AssertionError, match=r"no target s3: .*make up RGW=1"):
        CaseTargets.draw(without_s3, DEFAULT_TARGETS, 0)


class _SendingDirectory(DirectoryTarget):
    """A kind the model never heard of, which keeps chunks and sends copies."""

    kind: ClassVar[str] = "fourth"
    sends_copies: ClassVar[bool] = True


def test_what_cairn_answers_is_what_the_targets_can_do(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    local, offsite, s3, directory = (targets.get(settings, name)
                                     for name in ("local", "offsite", "s3", "dir"))
    assert [copy_answer(local, s3), copy_answer(offsite, directory)] == [202, 202]
    assert [copy_answer(local, offsite), copy_answer(s3, directory),
            copy_answer(directory, local)] == [422, 422, 422]
    assert [instant_answer(t, "ceph-a") for t in (local, offsite, s3, directory)] == [
        202, 409, 409, 409]
    assert isinstance(directory, DirectoryTarget)
    fourth = _SendingDirectory(directory.name, directory.config, directory.max_jobs)
    assert (copy_answer(fourth, s3), copy_answer(local, fourth)) == (202, 202)
    assert instant_answer(fourth, "ceph-a") == 409


def test_each_target_is_looked_at_as_its_family_keeps_data(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    assert layout_of(settings, "local") == RbdSnapshots("local", "ceph-a", "backups")
    assert layout_of(settings, "offsite") == RbdSnapshots("offsite", "ceph-b", "backups")
    assert isinstance(layout_of(settings, "s3"), Manifests)
    assert isinstance(layout_of(settings, "dir"), Manifests)


def test_a_chunk_target_holds_the_manifests_of_exactly_the_live_restore_points(
        tmp_path: Path) -> None:
    layout = layout_of(_settings(tmp_path), "dir")
    kept, deleted, failed = (str(uuid.uuid4()) for _ in range(3))
    made = {kept, deleted, failed}
    backend = DirectoryTarget("dir", _settings(tmp_path).directory_targets["dir"], 1).backend()
    try:
        layout.check("project-a", None, set(), made)
        backend.put(manifest_key("project-a", kept), b"sealed")
        layout.check("project-a", None, {kept}, made)
        with pytest.raises(AssertionError, match=kept):
            layout.check("project-a", None, set(), made)  # deleted, but its manifest stays
        backend.put(manifest_key("project-a", deleted), b"sealed")
        with pytest.raises(AssertionError, match=deleted):
            layout.check("project-a", None, {kept}, made)
        backend.delete(manifest_key("project-a", deleted))
        with pytest.raises(AssertionError, match=failed):
            layout.check("project-a", None, {kept, failed}, made)  # live, but gone
    finally:
        layout.close()
        backend.close()
