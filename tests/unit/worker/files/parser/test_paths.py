"""Paths and the rule for names that are not valid Unicode (worker/files/parser/paths.py)."""

from __future__ import annotations

import os

import pytest

from worker.files.parser.errors import Limit, NotFound
from worker.files.parser.paths import display_name, name_key, raw_name, split_path


def test_a_path_is_split_into_its_names_with_dots_and_empty_names_dropped() -> None:
    assert split_path("/") == []
    assert split_path("//etc/./nginx//nginx.conf/") == ["etc", "nginx", "nginx.conf"]


@pytest.mark.parametrize("path", ["/etc/../root", "/..", "../etc"])
def test_a_dot_dot_is_refused_not_resolved(path: str) -> None:
    with pytest.raises(NotFound):
        split_path(path)


@pytest.mark.parametrize("path", ["etc/passwd", "", "/etc\x00/passwd"])
def test_a_relative_path_or_a_nul_is_refused(path: str) -> None:
    with pytest.raises(NotFound):
        split_path(path)


def test_an_over_long_path_is_a_limit() -> None:
    with pytest.raises(Limit):
        split_path("/" + "a" * 5000)
    with pytest.raises(NotFound):
        split_path("/" + "a" * 1025)


@pytest.mark.parametrize("raw", [
    "plain.txt", "grüße ü.txt", os.fsdecode(b"caf\xe9.txt"), "has \ufffd in it",
    os.fsdecode(b"\xff\xfe") + "\ufffd" + "E9", "lone \ud800 unit", "x\ufffdu00E9"])
def test_every_name_is_listed_as_valid_unicode_and_maps_back_to_itself(raw: str) -> None:
    shown = display_name(raw)
    shown.encode("utf-8")  # no lone surrogate left: JSON, a URL, a tar header take it
    assert raw_name(shown) == raw


def test_a_latin1_name_shows_its_byte_in_hex_after_a_replacement_character() -> None:
    assert display_name(os.fsdecode(b"caf\xe9.txt")) == "caf\ufffdE9.txt"
    assert display_name("a\ufffdb") == "a\ufffd\ufffdb"


def test_two_different_names_never_list_the_same() -> None:
    names = [os.fsdecode(b"caf\xe9"), "caf\ufffdE9", "caf\ufffd\ufffdE9", "caf\udce9"]
    assert len({display_name(name) for name in names[:3]}) == 3
    assert display_name(names[0]) == display_name(names[3])  # the same name, decoded alike


@pytest.mark.parametrize("shown", ["bad\ufffd", "bad\ufffdzz", "bad\ufffd41", "x\ufffduDCE9"])
def test_a_name_no_listing_shows_is_not_found(shown: str) -> None:
    with pytest.raises(NotFound):
        raw_name(shown)


def test_listings_sort_bytewise_on_utf8() -> None:
    names = ["b", "B", "é", "a", "Z", "ä"]
    assert sorted(names, key=name_key) == ["B", "Z", "a", "b", "ä", "é"]


@pytest.mark.parametrize("raw", ["x/passwd", "/", "a\x00b", "\udce9/\ufffd"])
def test_a_name_holding_a_slash_or_a_nul_is_listed_as_one_name(raw: str) -> None:
    # A crafted directory entry named "x/passwd": listed with its "/", its path would name
    # passwd under a sibling "x" (a symlink to /etc, say), in a listing and in a tar.
    shown = display_name(raw)
    assert "/" not in shown
    assert "\x00" not in shown
    assert split_path("/d/" + shown) == ["d", shown]
    assert raw_name(shown) == raw


def test_a_symlinks_target_keeps_its_slashes() -> None:
    assert display_name("../etc/\udce9", separators=False) == "../etc/\ufffdE9"
    assert raw_name("../etc/\ufffdE9") == "../etc/\udce9"
