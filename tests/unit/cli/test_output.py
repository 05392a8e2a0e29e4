"""The CLI's tables and messages show other systems' text (Cinder's volume names and
errors, names saved before the API refused control characters) as text: a terminal never
receives an escape sequence, a bidirectional control or an invisible character from them."""

from __future__ import annotations

import re

import pytest

from cli.output import printable, table
from services.formats import PRINTABLE


@pytest.mark.parametrize(("raw", "shown"), [
    ("\x1b[2J\x1b]0;owned\x07", "\\x1b[2J\\x1b]0;owned\\x07"),  # clear screen, retitle
    ("\x9b31m", "\\x9b31m"),                     # C1 CSI
    ("evil\u202egnp.exe", "evil\\u202egnp.exe"),  # reads "exe.png"
    ("a\u2066b\u2069", "a\\u2066b\\u2069"),
    ("line\nforged\r", "line\\nforged\\r"),
    ("\u2028", "\\u2028"),
    ("zero\u200bwidth\ufeff", "zero\\u200bwidth\\ufeff"),
    ("plan\U000e0041\U000e007f", "plan\\U000e0041\\U000e007f"),
    ("half\ud800", "half\\ud800"),
])
def test_hostile_characters_are_shown_escaped(raw: str, shown: str) -> None:
    assert printable(raw) == shown


@pytest.mark.parametrize("text", ["nightly", "Sauvegarde — données", "גיבוי\u200f",
                                  "پشتیبان\u200cگیری", "👩\u200d💻 dev", "バックアップ"])
def test_what_the_api_accepts_as_free_text_is_shown_as_it_is(text: str) -> None:
    assert re.fullmatch(PRINTABLE, text)
    assert printable(text) == text


def test_a_table_cell_never_carries_a_raw_control(capsys: pytest.CaptureFixture[str]) -> None:
    table([{"name": "vol\x1b[8m hidden", "error": "Cinder: \u202eok"}],
          [("Name", lambda r: r["name"]), ("Error", lambda r: r["error"])])
    out = capsys.readouterr().out
    assert "\x1b" not in out
    assert "\u202e" not in out
    assert "vol\\x1b[8m hidden" in out
