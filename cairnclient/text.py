"""Other systems' text made safe to print on a terminal: Cinder's volume names and error
texts, names saved before the API refused control characters, and for the cloud's
administrator every project's. A terminal obeys the escape sequences in such text (repaint,
retitle, hide what follows) and reorders text around bidirectional controls, so each
character that is not plain printable text is shown as its Python escape (`\\x1b`,
`\\u202e`). The `cairn` CLI's tables and messages and the `openstack` plugin's tables both
print through here."""

from __future__ import annotations

import unicodedata

KEPT_FORMAT_CHARACTERS = frozenset("\u200c\u200d\u200e\u200f\u061c")
"""Format characters scripts need, which move or hide nothing around them: the zero-width
non-joiner and joiner (Persian, Indic scripts, emoji sequences) and the implicit direction
marks (right-to-left names); as the API's free text allows them."""
ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
"""Controls, format characters (bidi overrides, zero-width and tag characters), lone
surrogates, line and paragraph separators."""


def printable(text: str) -> str:
    """`text` with every control, format or separator character shown as its escape."""
    return "".join(c.encode("unicode_escape", "backslashreplace").decode("ascii")
                   if unicodedata.category(c) in ESCAPED_CATEGORIES
                   and c not in KEPT_FORMAT_CHARACTERS else c for c in text)
