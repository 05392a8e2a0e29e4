"""Formats of the names and ids callers send, as full-match patterns shared by the API's
schemas and its path parameters (and so declared in the OpenAPI document)."""

from __future__ import annotations

UUID = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
PROJECT = r"^[A-Za-z0-9_.-]{1,64}$"
"""Keystone's project ids are 32 hex digits; noauth callers name theirs freely, within this."""
IMAGE_SPEC = r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+){0,2}$"
"""`image`, `pool/image` or `cluster/pool/image`: what Ceph accepts in pool and image names
without quoting (no whitespace, newlines or '@', which names a snapshot)."""
VOLUME_REF = r"^[^\x00-\x1f\x7f]{1,400}$"
PRINTABLE = r"^[^\x00-\x1f\x7f]*$"
"""Names shown in lists and logs: no control characters (a newline in a name forges log
lines and breaks the CLI's tables)."""
