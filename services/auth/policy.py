"""Who may do what: OpenStack-style policy rules with defaults in code, overridable by a
policy file (YAML or JSON, `"action": "expression"`), as oslo.policy reads them.

The expression language is oslo.policy's common subset: `role:NAME`, `rule:NAME`,
`project_id:%(project_id)s` (the project the request acts on is the caller's own),
`is_admin:True` (the cloud's administrator, see RequestContext.is_admin), `@` (always), `!`
(never), `and`, `or`, `not` and parentheses. An unknown check or a reference to an
undefined rule is refused when the file is loaded, not when a request happens to reach
it.

The project a request acts on is the one its path names (`/v1/quotas/{project_id}`), and
otherwise the caller's own: every other route works in the caller's project, where another
project's objects are 404 to all but the cloud's administrator (whom `is_admin` decides)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path

import yaml

from services.context import RequestContext
from services.errors import Forbidden

Check = Callable[[RequestContext, "Policy", str], bool]
"""Whether the caller may act on the project (the third argument) the request acts on."""

DEFAULT_RULES: dict[str, str] = {
    # Keystone's default roles imply each other (admin > member > reader); the rules name
    # all of them so a cloud without implied roles behaves the same.
    # The cloud's administrator: the admin role in one of the configured admin projects
    # (`admin_projects`), not the admin role in any project (Cinder's old "admin anywhere").
    "admin": "is_admin:True",
    "member": "role:member or role:admin",
    "reader": "role:reader or role:member or role:admin",
    "volume:list": "rule:reader",
    "plan:list": "rule:reader",
    "plan:get": "rule:reader",
    "plan:create": "rule:member",
    "plan:update": "rule:member",
    "plan:delete": "rule:member",
    "plan:run": "rule:member",
    "backup:create": "rule:member",
    "restore_point:list": "rule:reader",
    "restore_point:get": "rule:reader",
    "restore_point:update": "rule:member",
    "restore_point:delete": "rule:member",
    "restore_point:restore": "rule:member",
    # Over a volume Cinder's backup service holds for its own restore (Cairn's Cinder backup
    # driver): Cairn does not take the volume from Cinder then, so only the cloud's
    # administrator, whose credentials the driver runs with, may ask.
    "restore_point:restore_for_cinder_backup": "rule:admin",
    "restore_point:verify": "rule:member",
    "restore_point:copy": "rule:member",
    "restore_point_group:get": "rule:reader",
    "restore_point_group:restore": "rule:member",
    # Files of restore points (file-level restore): reading a file is reading the data a
    # restore would bring back, which a reader may list already; a cloud that wants
    # downloads for members only says "file:get": "rule:member" (and file:versions, whose
    # hashes tell a file's content from another's).
    "file:list": "rule:reader",
    "file:get": "rule:reader",
    "file:search": "rule:reader",
    "file:versions": "rule:reader",
    "job:list": "rule:reader",
    "job:get": "rule:reader",
    "job:update": "rule:member",
    "job:cancel": "rule:member",
    "usage:get": "rule:reader",
    "quota:get": "rule:admin",
    "quota:update": "rule:admin",
    "target:list": "rule:reader",
    "orphan:list": "rule:admin",
    "webhook:list": "rule:reader",
    "webhook:get": "rule:reader",
    # A webhook's URL often carries a token its receiver trusts: readers see its host only.
    "webhook:get_url": "rule:member",
    "webhook:create": "rule:member",
    "webhook:update": "rule:member",
    "webhook:delete": "rule:member",
    "webhook:rotate": "rule:member",
    "webhook:test": "rule:member",
}

_DEFAULT_ROLES = frozenset({"reader", "member", "admin"})
_CALLER, _ANOTHER = "policy-check-own-project", "policy-check-another-project"
"""The projects of `Policy.cross_project_grants`' caller, and the one it acts on."""

ACTION_WORDS = {
    "list": "list", "get": "read", "create": "create", "update": "change", "delete": "delete",
    "run": "run", "restore": "restore", "verify": "verify", "cancel": "cancel",
    "rotate": "rotate the secret of", "test": "test", "search": "search",
    "versions": "compare the versions of",
    "restore_for_cinder_backup": "restore for Cinder's backup service",
}

_TOKEN = re.compile(r"\s*(\(|\)|(?:%\([\w.]*\)s|[^\s()])+)")
"""A parenthesis, or a word: `%(name)s` (oslo.policy's target substitution) is part of
one, its parentheses are not the grammar's."""


class PolicyError(ValueError):
    """A policy file that cannot be used; the message names the rule and the problem."""


class Policy:
    def __init__(self, overrides: Mapping[str, str] | None = None) -> None:
        self.rules: dict[str, Check] = {}
        texts = {**DEFAULT_RULES, **(overrides or {})}
        self.texts = texts
        for name, text in texts.items():
            try:
                self.rules[name] = _parse(text)
            except PolicyError as exc:
                raise PolicyError(f"policy rule {name!r} ({text!r}): {exc}") from None
        for name, text in texts.items():
            for ref in re.findall(r"rule:([\w:.\-]+)", text):
                if ref not in texts:
                    raise PolicyError(f"policy rule {name!r} refers to rule {ref!r}, which "
                                      "is not defined")

    @classmethod
    def from_file(cls, path: Path | None) -> Policy:
        if path is None:
            return cls()
        try:
            text = path.read_text()
        except OSError as exc:
            raise PolicyError(f"cannot read policy file {path}: {exc.strerror}") from None
        try:
            data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        except (ValueError, yaml.YAMLError) as exc:
            raise PolicyError(f"policy file {path} is not valid YAML/JSON: {exc}") from None
        if data is None:
            data = {}
        if not isinstance(data, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
            raise PolicyError(f"policy file {path} must map rule names to rule strings")
        return cls(data)

    def allows(self, action: str, ctx: RequestContext, project: str | None = None) -> bool:
        """Whether the caller may take `action` on `project` (default: its own)."""
        check = self.rules.get(action)
        return check is not None and check(ctx, self, ctx.project_id if project is None
                                           else project)

    def allowed_actions(self, ctx: RequestContext) -> list[str]:
        """Every action (`plan:create`, ...) the caller may take in its own project, for a
        UI that shows only those."""
        return sorted(a for a in self.rules if ":" in a and self.allows(a, ctx))

    def cross_project_grants(self) -> list[str]:
        """The rules (actions, and the `admin` rule) that let a caller who is not the
        cloud's administrator act on another project or on the whole cloud, where the
        defaults do not: checked for a caller holding every role any rule names, acting on
        a project that is not its own. `"admin": "role:admin"` (Cinder's old policies) is
        one: the admin of any project would set every project's quota."""
        roles = {role.lower() for text in self.texts.values()
                 for role in re.findall(r"role:([^\s()]+)", text)}
        stranger = RequestContext(project_id=_CALLER, roles=frozenset(roles | _DEFAULT_ROLES))
        defaults = Policy()
        return sorted(name for name in self.rules
                      if (":" in name or name == "admin")
                      and self.allows(name, stranger, _ANOTHER)
                      and not defaults.allows(name, stranger, _ANOTHER))

    def enforce(self, action: str, ctx: RequestContext, project: str | None = None) -> None:
        if not self.allows(action, ctx, project):
            kind, _, verb = action.partition(":")
            what = f"{ACTION_WORDS.get(verb, verb)} {kind.replace('_', ' ')}s"
            raise Forbidden(f"your role in project {ctx.project_id} may not {what} "
                            f"(policy {action!r}; roles: {', '.join(sorted(ctx.roles)) or 'none'})",
                            action=action)


def _parse(text: str) -> Check:
    tokens = _TOKEN.findall(text)
    if not tokens:
        return lambda ctx, policy, project: True  # oslo.policy: an empty rule allows
    check, rest = _parse_or(tokens)
    if rest:
        raise PolicyError(f"unexpected {rest[0]!r}")
    return check


Parser = Callable[[list[str]], tuple[Check, list[str]]]


def _binary(word: str, operand: Parser, combine: Callable[[Check, Check], Check],
            tokens: list[str]) -> tuple[Check, list[str]]:
    """`operand (word operand)*`, combined left to right."""
    left, tokens = operand(tokens)
    while tokens and tokens[0] == word:
        right, tokens = operand(tokens[1:])
        left = combine(left, right)
    return left, tokens


def _parse_or(tokens: list[str]) -> tuple[Check, list[str]]:
    return _binary("or", _parse_and, _either, tokens)


def _parse_and(tokens: list[str]) -> tuple[Check, list[str]]:
    return _binary("and", _parse_not, _both, tokens)


def _parse_not(tokens: list[str]) -> tuple[Check, list[str]]:
    if tokens and tokens[0] == "not":
        inner, rest = _parse_not(tokens[1:])
        return (lambda ctx, policy, project: not inner(ctx, policy, project)), rest
    return _parse_atom(tokens)


def _parse_atom(tokens: list[str]) -> tuple[Check, list[str]]:
    if not tokens:
        raise PolicyError("the rule ends too early")
    head, rest = tokens[0], tokens[1:]
    if head == "(":
        inner, rest = _parse_or(rest)
        if not rest or rest[0] != ")":
            raise PolicyError("a '(' is not closed")
        return inner, rest[1:]
    return _atom(head), rest


def _atom(word: str) -> Check:
    if word == "@":
        return lambda ctx, policy, project: True
    if word == "!":
        return lambda ctx, policy, project: False
    kind, sep, value = word.partition(":")
    if not sep:
        raise PolicyError(f"{word!r} is not a check (expected role:, rule:, project_id:, "
                          "is_admin:, @ or !)")
    if kind == "role":
        role = value.lower()
        return lambda ctx, policy, project: role in {r.lower() for r in ctx.roles}
    if kind == "rule":
        return lambda ctx, policy, project: policy.allows(value, ctx, project)
    if kind == "is_admin" and value in ("True", "False"):
        wanted = value == "True"
        return lambda ctx, policy, project: ctx.is_admin == wanted
    if kind == "project_id" and value == "%(project_id)s":
        # oslo.policy's meaning: the caller's project is the one acted on. Before, this was
        # always true, and `rule:admin or project_id:%(project_id)s` on the quota routes
        # let anyone set any project's quota.
        return lambda ctx, policy, project: project == ctx.project_id
    raise PolicyError(f"unknown check {word!r}")


def _either(a: Check, b: Check) -> Check:
    return lambda ctx, policy, project: a(ctx, policy, project) or b(ctx, policy, project)


def _both(a: Check, b: Check) -> Check:
    return lambda ctx, policy, project: a(ctx, policy, project) and b(ctx, policy, project)
