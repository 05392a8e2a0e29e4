"""Access rules of Keystone application credentials: a token made from an application
credential that has them may call only the (service type, method, path) they list, and each
service enforces that for itself, as keystonemiddleware's `validate_allowed_request` does.
A service that validates tokens without saying it understands access rules (the
`OpenStack-Identity-Access-Rules` header) is refused such tokens by Keystone altogether."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from services.errors import Forbidden

SERVICE_TYPE = "volume-backup"
"""Cairn's service type in the Keystone catalog (`cairn-manage keystone register`; the CLI's
`cairnclient.config.SERVICE_TYPE`): the `service` an access rule names for Cairn."""

HEADER = {"OpenStack-Identity-Access-Rules": "1"}
"""Sent with every token validation: Cairn enforces version 1 of access rules."""


@dataclass(frozen=True)
class AccessRule:
    service: str
    method: str
    path: str

    def __str__(self) -> str:
        return f"{self.method} {self.path} on {self.service}"


def from_token(body: dict[str, Any]) -> tuple[AccessRule, ...] | None:
    """The token's access rules; None when it may call anything its roles allow (not an
    application credential's, or one without rules). A rule missing a field allows nothing
    (keystonemiddleware would fail on it)."""
    credential = body.get("application_credential")
    if not isinstance(credential, dict) or credential.get("access_rules") is None:
        return None
    rules = credential["access_rules"]
    return tuple(AccessRule(str(rule["service"]), str(rule["method"]), str(rule["path"]))
                 for rule in (rules if isinstance(rules, list) else [])
                 if isinstance(rule, dict) and {"service", "method", "path"} <= rule.keys())


def allows(rules: Sequence[AccessRule], method: str, path: str) -> bool:
    return any(rule.service == SERVICE_TYPE and rule.method == method
               and _pattern(rule.path).fullmatch(path) is not None for rule in rules)


def enforce(rules: Sequence[AccessRule] | None, method: str, path: str) -> None:
    """Refuse (403) a request the token's access rules do not list."""
    if rules is None or allows(rules, method, path):
        return
    mine = [str(rule) for rule in rules if rule.service == SERVICE_TYPE]
    listed = f"it allows {', '.join(mine)}" if mine else f"it lists nothing on {SERVICE_TYPE}"
    raise Forbidden(f"the application credential's access rules do not allow {method} {path} "
                    f"on {SERVICE_TYPE} ({listed}); use a credential whose rules do")


@lru_cache(maxsize=1024)
def _pattern(path: str) -> re.Pattern[str]:
    """keystonemiddleware's path template: `*` or `{name}` is one path segment, `**` any
    number of them, the rest literal; the whole path must match."""
    regex = ""
    for match in re.finditer(r"(?P<one>\{[^}]*\}|\*(?!\*))|(?P<any>\*\*)|(?P<literal>.)",
                             path, re.DOTALL):
        if match["one"]:
            regex += r"[^/]+"
        elif match["any"]:
            regex += ".*"
        else:
            regex += re.escape(match["literal"])
    return re.compile(regex, re.DOTALL)
