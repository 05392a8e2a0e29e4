"""The parser child's answers are checked before the file service uses any of them
(worker/files/replies.py): a taken-over or confused parser's garbage is Malformed."""

from __future__ import annotations

from typing import Any

import pytest

from worker.files.replies import Malformed, checked

VOLUME = 1 << 30


def _entry(**more: Any) -> dict[str, Any]:
    return {"name": "hosts", "type": "file", "size": 10, "mode": 0o100644, "uid": 0,
            "gid": 0, "mtime": "2026-11-27T06:00:00.123456Z", "target": None, **more}


PARTITION = {"index": 1, "scheme": "gpt", "offset": 1 << 20, "size": 1 << 29, "type": None,
             "name": None, "filesystem": "ext4", "label": None, "readable": True,
             "reason": None}


@pytest.mark.parametrize(("op", "value", "args"), [
    ("stat", {**_entry(), "path": "/etc/hosts"}, {}),
    ("stat", {**_entry(name="", type="dir"), "path": "/"}, {}),
    ("stat", {**_entry(mtime=None, uid=None, gid=None), "path": "/x"}, {}),
    ("list", {"path": "/etc", "partition": None, "entries": [_entry()], "next_marker": "h"},
     {}),
    ("partitions", [PARTITION], {}),
    ("runs", {"size": 10, "runs": [[0, 5], [None, 5]]}, {}),
    ("runs", None, {}),
    ("walk", {"entries": [{**_entry(), "path": "/etc/hosts"}], "truncated": False}, {}),
    ("search", {"entries": [], "truncated": True, "visited": 3}, {}),
])
def test_a_well_formed_answer_is_taken(op: str, value: Any, args: dict[str, Any]) -> None:
    assert checked(op, value, b"", args, VOLUME) is value


@pytest.mark.parametrize(("op", "value"), [
    ("stat", {**_entry(size=-1), "path": "/x"}),
    ("stat", {**_entry(size="10"), "path": "/x"}),
    ("stat", {**_entry(size=True), "path": "/x"}),
    ("stat", {**_entry(type="block"), "path": "/x"}),
    ("stat", {**_entry(mtime="yesterday"), "path": "/x"}),
    ("stat", {**_entry(mtime="2026-11-27T06:00:00Z"), "path": "/x"}),
    ("stat", {**_entry(uid=-1), "path": "/x"}),
    ("stat", {**_entry(mode=1 << 20), "path": "/x"}),
    ("stat", {**_entry(name=7), "path": "/x"}),
    ("stat", {**_entry(name="a/b"), "path": "/x"}),
    ("stat", {**_entry(name="a\0b"), "path": "/x"}),
    ("stat", {**_entry(target=["/etc"]), "path": "/x"}),
    ("stat", {**_entry(), "path": "relative"}),
    ("stat", _entry()),
    ("stat", [1, 2]),
    ("list", {"path": "/", "partition": None, "entries": [_entry(name="")],
              "next_marker": None}),
    ("list", {"path": "/", "partition": -1, "entries": [], "next_marker": None}),
    ("list", {"path": "/", "partition": None, "entries": {}, "next_marker": None}),
    ("partitions", [{**PARTITION, "size": VOLUME}]),
    ("partitions", [{**PARTITION, "readable": "yes"}]),
    ("partitions", [{**PARTITION, "scheme": "apm"}]),
    ("partitions", {"index": 0}),
    ("runs", {"size": 10, "runs": [[-1, 5]]}),
    ("runs", {"size": 10, "runs": [[0, 5, 6]]}),
    ("runs", {"size": -10, "runs": []}),
    ("walk", {"entries": [_entry()], "truncated": False}),
    ("search", {"entries": [], "truncated": 0, "visited": 3}),
    ("open", {"size": 3}),
])
def test_a_malformed_answer_is_refused(op: str, value: Any) -> None:
    with pytest.raises(Malformed):
        checked(op, value, b"", {}, VOLUME)


def test_a_read_longer_than_asked_is_refused() -> None:
    assert checked("read", None, b"abc", {"length": 3}, VOLUME) is None
    with pytest.raises(Malformed):
        checked("read", None, b"abcd", {"length": 3}, VOLUME)


def test_an_answers_json_is_bounded_well_below_the_reply() -> None:
    from worker.files.session import ParserLimits

    config = ParserLimits().child()
    assert config.max_header_bytes <= config.max_reply_bytes // 4
    assert "--max-header" in config.argv()
