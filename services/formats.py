"""Formats of the names and ids callers send, as full-match patterns shared by the API's
schemas and its path parameters (and so declared in the OpenAPI document)."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field

UUID = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
PROJECT = r"^[A-Za-z0-9_.-]{1,64}$"
"""Keystone's project ids are 32 hex digits; noauth callers name theirs freely, within this."""
IMAGE_SPEC = r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+){0,2}$"
"""`image`, `pool/image` or `cluster/pool/image`: what Ceph accepts in pool and image names
without quoting (no whitespace, newlines or '@', which names a snapshot)."""

_REFUSED = (r"\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u200b\u2060-\u206f\ufeff"
            r"\ufff9-\ufffb\U000e0000-\U000e007f")
"""What no text a caller sends may hold: the C0 and C1 control characters and DEL (a
newline forges log lines and breaks the CLI's tables; an escape sequence repaints the
terminal that shows a job list), the line and paragraph separators (newlines to
JavaScript and to many log viewers), the bidirectional embeddings, overrides and
isolates (U+202A-E, U+2066-9), which make a name read differently from what it is (the
"Trojan Source" characters), and the characters that show nothing and join or mark
nothing a script needs: the zero-width space (U+200B), the word joiner and invisible
operators (U+2060-4, with the deprecated format characters U+206A-F), the zero-width
no-break space (U+FEFF, a byte-order mark mid-text), the interlinear annotation marks
(U+FFF9-B, which hide text between them) and the tag characters (U+E0000-7F, invisible
ASCII: "plan" and "plan" with tags read alike, and a reader of the raw text sees words
nobody was shown). The zero-width joiner and non-joiner (U+200C, U+200D: Persian, Indic
scripts, emoji sequences) and the implicit direction marks (U+200E, U+200F, U+061C:
right-to-left names need them, and they reorder nothing around them) stay allowed; the
subdivision flags (England's, Scotland's, Wales'), made of tag characters, do not.
Lone surrogates never get this far: they are not text, and pydantic refuses them."""
PRINTABLE = rf"^[^{_REFUSED}]*$"
"""Names shown in lists and logs: none of the characters above."""
VOLUME_REF = rf"^[^{_REFUSED}]{{1,400}}$"

FreeText = Annotated[str, Field(pattern=PRINTABLE)]
"""Every free-text field a caller sets (names, descriptions, prefixes, schedule strings):
`name: FreeText = Field(max_length=255)`. The pattern is declared in the OpenAPI
document, and a value holding a refused character is answered 422 naming the field."""

_CINDER_ID = re.compile(UUID)


def _volume_ref(text: str) -> str:
    # Cinder's ids are UUIDs, which Cinder reads in any case: one spelling per volume, so a
    # list cannot name one volume many times (each a call to Cinder) by varying the case.
    return text.lower() if _CINDER_ID.match(text) else text


VolumeRef = Annotated[str, Field(min_length=1, max_length=512, pattern=PRINTABLE),
                      AfterValidator(_volume_ref)]
"""A volume as a caller names it: a Cinder volume id (kept lower-case) or an RBD image
`cluster/pool/image`."""
